// Read a heap snapshot with memlab (@memlab/core, installed by
// testprogs/install-deps.sh in the cache's npm folder: run with NODE_PATH
// set to its node_modules) and print, as one JSON line after @@MEMLAB@@,
// what memlab makes of it:
//   nodes, edges         how many it parsed
//   self_size            the sum of every node's self size, and by node name
//                        for the names asked with name=NAME
//   selected             for each argument, the nodes it selects with
//                        memlab's retained size (its own dominator tree):
//                          a/b/c     the node reached from the root by the
//                                    edges named a, then b, then c (edge:
//                                    the last one's type)
//                          name=N    every node whose name is N
// Usage: node memlab_read.js FILE [a/b/c | name=N] ...
'use strict';
const memlab = require('@memlab/core');

async function main() {
  const [file, ...wanted] = process.argv.slice(2);
  memlab.config.verbose = false;
  memlab.config.muteConsole = true;
  const snapshot = await memlab.utils.getSnapshotFromFile(file, {buildNodeIdIndex: true});
  memlab.analysis.preparePathFinder(snapshot);
  memlab.config.muteConsole = false;
  const out = {nodes: 0, edges: snapshot.edges.length, self_size: 0, types: {}, selected: {}};
  const byName = {};
  for (const w of wanted) {
    if (w.startsWith('name=')) {
      byName[w.slice(5)] = out.selected[w] = [];
    }
  }
  const describe = (node, edge) => ({id: node.id, name: node.name, type: node.type,
                                     self_size: node.self_size, retained: node.retainedSize,
                                     edge: edge ? edge.type : null});
  snapshot.nodes.forEach(node => {
    out.nodes += 1;
    out.self_size += node.self_size;
    out.types[node.type] = (out.types[node.type] || 0) + node.self_size;
    if (byName[node.name] !== undefined) {
      byName[node.name].push(describe(node));
    }
  });
  const root = snapshot.nodes.get(0);
  for (const w of wanted) {
    if (w.startsWith('name=')) {
      continue;
    }
    let node = root;
    let edge = null;
    for (const step of w.split('/')) {
      edge = node && node.references.find(e => String(e.name_or_index) === step);
      node = edge ? edge.toNode : null;
    }
    out.selected[w] = node ? [describe(node, edge)] : [];
  }
  process.stdout.write('@@MEMLAB@@' + JSON.stringify(out) + '\n');
}

main().catch(e => {
  process.stderr.write('memlab_read: ' + (e && e.stack || e) + '\n');
  process.exit(1);
});
