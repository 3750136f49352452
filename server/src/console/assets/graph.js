// The fleet's route graph as inline SVG: the sessions as nodes (in columns by how
// far the task has to travel to reach them), the routes as edges (a join's edges
// marked), the task's entry, the master plan's assignments, the mentions seen so
// far; the deliveries under way
// highlighted (class `active`) on their edge and their target.

import { s } from "./dom.js";

const W = 132;
const H = 34;
const COL = 190;
const ROW = 54;
const PAD = 16;
const TASK = "task";
const PLAN = "plan";

function levels(graph) {
  const level = new Map([[TASK, 0]]);
  for (const n of graph.sessions) level.set(n.name, 1);
  const n = graph.sessions.length;
  for (let pass = 0; pass < n; pass++) {
    let moved = false;
    for (const r of graph.routes) {
      for (const w of r.when) {
        for (const t of r.to) {
          const want = (level.get(w) || 1) + 1;
          if (want > (level.get(t) || 1) && want <= n + 1) {
            level.set(t, want);
            moved = true;
          }
        }
      }
    }
    if (!moved) break;
  }
  return level;
}

/**
 * The graph's SVG. `state.active`: the deliveries under way ({from, to}); `state.states`:
 * session name -> lifecycle state; `state.mentions`: "from\0to" pairs seen; `state.planTo`:
 * the sessions the master plan's entries are assigned to.
 */
export function drawGraph(graph, state) {
  const level = levels(graph);
  const usesPlan = [...state.active.values()].some((d) => d.from.includes(PLAN)) || state.planTo.size > 0;
  if (usesPlan) level.set(PLAN, 0);
  const columns = new Map();
  for (const [name, l] of level) {
    if (!columns.has(l)) columns.set(l, []);
    columns.get(l).push(name);
  }
  const pos = new Map();
  let rows = 1;
  for (const [l, names] of columns) {
    names.forEach((name, i) => pos.set(name, { x: PAD + l * COL, y: PAD + i * ROW }));
    rows = Math.max(rows, names.length);
  }
  const cols = Math.max(...columns.keys()) + 1;
  const width = PAD * 2 + (cols - 1) * COL + W;
  const height = PAD * 2 + (rows - 1) * ROW + H + 24;

  const edges = [];
  const seen = new Set();
  const edge = (from, to, kind, route) => {
    const key = from + "\u0000" + to;
    if (seen.has(key) || !pos.has(from) || !pos.has(to)) return;
    seen.add(key);
    edges.push({ from, to, kind, route });
  };
  for (const st of graph.start) edge(TASK, st, "task");
  for (const r of graph.routes) for (const w of r.when) for (const t of r.to) edge(w, t, r.kind, r.index);
  for (const to of state.planTo) edge(PLAN, to, "plan");
  for (const m of state.mentions) {
    const [from, to] = m.split("\u0000");
    edge(from, to, "mention");
  }
  const activeEdges = new Set();
  const activeNodes = new Set();
  for (const d of state.active.values()) {
    activeNodes.add(d.to);
    for (const f of d.from) {
      const from = f === "fleet" ? TASK : f;
      edge(from, d.to, "delivery");
      activeEdges.add(from + "\u0000" + d.to);
    }
  }

  const paths = edges.map((e) => {
    const a = pos.get(e.from);
    const b = pos.get(e.to);
    let d;
    if (b.x > a.x) {
      const x1 = a.x + W;
      const y1 = a.y + H / 2;
      const x2 = b.x - 6;
      const y2 = b.y + H / 2;
      const mx = (x1 + x2) / 2;
      d = `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`;
    } else {
      const x1 = a.x + W / 2;
      const y1 = a.y + H;
      const x2 = b.x + W / 2;
      const y2 = b.y + H + 6;
      const low = Math.max(y1, y2) + 20;
      d = `M${x1},${y1} C${x1},${low} ${x2},${low} ${x2},${y2}`;
    }
    const active = activeEdges.has(e.from + "\u0000" + e.to);
    return s(
      "path",
      {
        d,
        class: "edge " + e.kind + (active ? " active" : ""),
        "marker-end": "url(#arrow)",
        testid: "graph-edge",
        data: { from: e.from, to: e.to, kind: e.kind },
      },
      s("title", {}, e.from + " → " + e.to + " (" + e.kind + ")"),
    );
  });

  const nodes = [...pos.entries()].map(([name, p]) => {
    const pseudo = name === TASK || name === PLAN;
    const st = state.states.get(name) || "";
    const cls = ["node", pseudo ? "pseudo" : "session", st, activeNodes.has(name) ? "active" : ""].join(" ");
    return s(
      "g",
      {
        class: cls.trim(),
        transform: `translate(${p.x},${p.y})`,
        testid: "graph-node",
        data: pseudo ? { pseudo: name } : { session: name },
      },
      s("title", {}, pseudo ? name : name + (st ? " — " + st : "")),
      s("rect", { width: W, height: H, rx: 6 }),
      s("text", { x: W / 2, y: H / 2 + 4, "text-anchor": "middle" }, name.length > 17 ? name.slice(0, 16) + "…" : name),
    );
  });

  return s(
    "svg",
    {
      class: "graph",
      viewBox: `0 0 ${width} ${height}`,
      width,
      height,
      role: "img",
      "aria-label": "Route graph: sessions and routes, deliveries under way highlighted",
      testid: "route-graph",
    },
    s(
      "defs",
      {},
      s(
        "marker",
        { id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }),
      ),
    ),
    paths,
    nodes,
  );
}
