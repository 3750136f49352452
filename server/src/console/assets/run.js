// A run: its state, cost against budget, every session live (the journal streamed
// over SSE, resumed with Last-Event-ID; the server's tally re-read as records come),
// the master plan, the route graph, the sessions' changes, the artifacts; cancel.

import { ApiError, download, getJson, postJson } from "./api.js";
import { age, count, fill, h, runHref, toast, usd } from "./dom.js";
import { drawGraph } from "./graph.js";
import { RunModel } from "./model.js";
import { follow } from "./sse.js";

/** How often the run's view is re-read at most while records stream. */
const VIEW_EVERY_MS = 700;
const ENDED = new Set(["completed", "failed", "interrupted"]);

export function artifactList(run, session) {
  const list = h("ul", { class: "artifacts", testid: "artifacts" });
  getJson("/v1/runs/" + encodeURIComponent(run) + "/artifacts")
    .then(({ artifacts }) => {
      const mine = artifacts.filter((a) => session === undefined || a.session === session);
      fill(
        list,
        mine.length
          ? mine.map((a) =>
              h(
                "li",
                {},
                h(
                  "a",
                  {
                    href: a.href,
                    testid: "artifact-link",
                    data: { name: a.name },
                    on: {
                      click: (e) => {
                        e.preventDefault();
                        download(a.href, a.name.replaceAll("/", "_")).catch((x) => toast("Download failed: " + x.message));
                      },
                    },
                  },
                  a.name,
                ),
                h("span", { class: "muted" }, " " + count(a.bytes) + " B"),
              ),
            )
          : h("li", { class: "muted" }, "No artifacts yet."),
      );
    })
    .catch((e) => fill(list, h("li", { class: "error" }, "Cannot list the artifacts: " + e.message)));
  return list;
}

function costBar(budget) {
  const spent = budget.spent_usd || 0;
  const limit = budget.limit_usd;
  const fillEl = h("div", { class: "fill" });
  const bar = h(
    "div",
    {
      class: "costbar" + (limit && spent > limit ? " over" : ""),
      role: "meter",
      testid: "cost-bar",
      attrs: {
        "aria-label": "Cost against budget",
        "aria-valuemin": "0",
        "aria-valuemax": String(limit || spent || 1),
        "aria-valuenow": String(spent),
      },
      data: { spent: String(spent), limit: limit === null || limit === undefined ? "" : String(limit) },
    },
    fillEl,
  );
  fillEl.style.width = (limit ? Math.min(100, (spent / limit) * 100) : 0).toFixed(1) + "%";
  return h(
    "div",
    { class: "cost" },
    bar,
    h("span", { class: "num" }, usd(spent) + (limit ? " of " + usd(limit) : " (no budget)")),
  );
}

/** The sessions table's columns. At a phone's width each row is a card whose cells
 * name their column (`data-label`, shown by the CSS); the ARIA roles keep it a table
 * for a screen reader whatever its CSS display. */
const COLUMNS = ["Session", "State", "Turn", "Tokens in / out", "Cost", "Restarts", "Pauses", "Trace"];

function cell(label, props, ...content) {
  return h("td", { ...props, attrs: { role: "cell" }, data: { label } }, ...content);
}

function sessionRow(run, v, live, traceUrl) {
  const state = (live && live.state) || v.state;
  const turn = Math.max(v.turns, (live && live.turn) || 0);
  const restarts = Math.max(v.restarts, (live && live.restarts) || 0);
  const pauses = Math.max(v.pauses || 0, (live && live.pauses) || 0);
  const until = v.paused_until_ms ? " (until " + new Date(v.paused_until_ms).toLocaleTimeString() + ")" : "";
  const [, STATE, TURN, TOKENS, COST, RESTARTS, PAUSES, TRACE] = COLUMNS;
  return h(
    "tr",
    { testid: "session-row", data: { session: v.name }, attrs: { role: "row" } },
    h("th", { scope: "row", attrs: { role: "rowheader" } }, h("a", { href: runHref(run, v.name) }, v.name)),
    cell(STATE, {}, h("span", { class: "state " + state, testid: "session-state" }, state)),
    cell(TURN, { class: "num", testid: "session-turn" }, String(turn)),
    cell(TOKENS, { class: "num", testid: "session-tokens" }, count(v.input_tokens) + " / " + count(v.output_tokens)),
    cell(COST, { class: "num", testid: "session-cost" }, usd(v.cost_usd)),
    cell(RESTARTS, { class: "num", testid: "session-restarts" }, String(restarts)),
    cell(PAUSES, { class: "num", testid: "session-pauses", title: String(pauses) + until }, String(pauses), until),
    cell(TRACE, {}, traceUrl ? h("a", { href: traceUrl, target: "_blank", rel: "noopener noreferrer", testid: "trace-link" }, "trace") : "–"),
  );
}

function planList(model) {
  const entries = [...model.plan.values()];
  if (!entries.length) return h("p", { class: "muted", testid: "plan" }, "No master plan.");
  return h(
    "ol",
    { class: "plan", testid: "plan" },
    entries.map((e) =>
      h(
        "li",
        { testid: "plan-entry", data: { state: e.status, id: e.id } },
        h("span", { class: "state " + e.status }, e.status.replace("_", " ")),
        " ",
        h("span", {}, e.content || e.id),
        h("span", { class: "muted" }, " → " + e.assigned_to),
      ),
    ),
  );
}

export function runPage(main, run, ctx) {
  const enc = encodeURIComponent(run);
  const title = h("h1", {}, "Run ", h("span", { class: "mono" }, run));
  const summary = h("p", { class: "summary" });
  const conn = h("span", { class: "conn muted", role: "status", testid: "stream-status" }, "connecting…");
  const cancel = h("button", { type: "button", class: "danger", testid: "cancel-run", hidden: true }, "Cancel run");
  const cost = h("div", {});
  const rows = h("tbody", { attrs: { role: "rowgroup" } });
  const sessions = h(
    "table",
    { class: "sessions", testid: "sessions-table", attrs: { role: "table" } },
    h("caption", { class: "sr-only" }, "Sessions"),
    h(
      "thead",
      { attrs: { role: "rowgroup" } },
      h(
        "tr",
        { attrs: { role: "row" } },
        COLUMNS.map((t) => h("th", { scope: "col", attrs: { role: "columnheader" } }, t)),
      ),
    ),
    rows,
  );
  const plan = h("div", {}, h("p", { class: "muted", testid: "plan" }, "No master plan."));
  const graphBox = h("div", { class: "graphbox scroll-x" });
  const changes = h("ul", { class: "changes", testid: "changes" });
  const artifacts = h("div", {});
  fill(
    main,
    h("p", {}, h("a", { href: "#/runs" }, "← Runs")),
    h("div", { class: "titlebar" }, title, conn, cancel),
    summary,
    cost,
    h("h2", {}, "Sessions"),
    h("div", { class: "scroll-x", testid: "sessions-box" }, sessions),
    h("div", { class: "cols" }, h("section", {}, h("h2", {}, "Master plan"), plan), h("section", {}, h("h2", {}, "Routes"), graphBox)),
    h("h2", {}, "Changes"),
    changes,
    h("h2", {}, "Artifacts"),
    artifacts,
  );

  const model = new RunModel();
  let view = null;
  let graph = null;
  let stopped = false;
  let viewTimer = null;
  let viewDue = false;
  let drawDue = false;
  let graphDue = false;

  function draw() {
    drawDue = false;
    if (!view) return;
    title.replaceChildren("Run ", h("span", { class: "mono" }, run), " ", h("span", { class: "state " + view.state, testid: "run-state" }, view.state));
    fill(
      summary,
      "Fleet ",
      h("strong", {}, view.fleet || "–"),
      view.submitted_by ? " · submitted by " + view.submitted_by : "",
      " · " + age(view.created_ms) + " ago",
      view.outcome ? " · outcome " + view.outcome : "",
      view.error ? h("span", { class: "error" }, " · " + view.error) : "",
      view.cancelled_by ? " · cancelled by " + view.cancelled_by : "",
      view.trace_url ? [" · ", h("a", { href: view.trace_url, target: "_blank", rel: "noopener noreferrer", testid: "run-trace-link" }, "trace in Jaeger")] : "",
    );
    fill(cost, costBar(view.budget));
    cancel.hidden = ENDED.has(view.state) || ctx.me.role === "read";
    fill(rows, view.sessions.map((v) => sessionRow(run, v, model.sessions.get(v.name), view.trace_url)));
  }

  function drawPlanAndGraph() {
    graphDue = false;
    fill(plan, planList(model));
    if (graph) {
      const states = new Map();
      if (view) for (const v of view.sessions) states.set(v.name, (model.sessions.get(v.name) || {}).state || v.state);
      fill(graphBox, drawGraph(graph, { active: model.active, states, mentions: model.mentions, planTo: new Set([...model.plan.values()].map((e) => e.assigned_to)) }));
    }
  }

  async function loadView() {
    viewDue = false;
    try {
      view = await getJson("/v1/runs/" + enc);
      if (stopped) return;
      schedule();
    } catch (e) {
      if (e instanceof ApiError && e.status === 404) fill(main, h("h1", {}, "No run " + run), h("p", {}, h("a", { href: "#/runs" }, "← Runs")));
      else conn.textContent = "Cannot read the run: " + e.message;
    }
  }

  function schedule() {
    if (!drawDue) {
      drawDue = true;
      requestAnimationFrame(() => {
        draw();
        if (graphDue) drawPlanAndGraph();
      });
    }
  }

  function viewSoon() {
    if (viewDue) return;
    viewDue = true;
    viewTimer = setTimeout(loadView, VIEW_EVERY_MS);
  }

  async function loadChanges() {
    try {
      const c = await getJson("/v1/runs/" + enc + "/changes");
      fill(
        changes,
        c.sessions.length
          ? c.sessions.map((s) =>
              h(
                "li",
                {},
                h("a", { href: runHref(run, s.session), testid: "changes-link", data: { session: s.session } }, s.session),
                s.diff ? " — diff " + count(s.bytes) + " B" : " — no diff",
                s.findings.length ? h("span", { class: "warn" }, " · " + s.findings.length + " vetting finding(s)") : "",
              ),
            )
          : h("li", { class: "muted" }, "No changes (yet: coding sessions' diffs come at the run's end)."),
      );
    } catch (e) {
      fill(changes, h("li", { class: "error" }, "Cannot read the changes: " + e.message));
    }
  }

  cancel.addEventListener("click", async () => {
    cancel.disabled = true;
    try {
      view = await postJson("/v1/runs/" + enc + "/cancel");
      toast("Cancelling run " + run);
      schedule();
    } catch (e) {
      toast("Cannot cancel: " + e.message);
    } finally {
      cancel.disabled = false;
    }
  });

  getJson("/v1/runs/" + enc + "/fleet")
    .then((g) => {
      graph = g;
      graphDue = true;
      schedule();
    })
    .catch(() => fill(graphBox, h("p", { class: "muted" }, "The fleet's routes are known only for runs of this server.")));

  loadView();
  loadChanges();
  fill(artifacts, artifactList(run));
  const stream = follow("/v1/runs/" + enc + "/events", {
    record: (_id, data) => {
      let rec;
      try {
        rec = JSON.parse(data);
      } catch (_) {
        return;
      }
      if (model.take(rec)) graphDue = true;
      if (rec.type === "state" || rec.type === "turn_started" || rec.type === "restart" || rec.type === "paused") schedule();
      if (graphDue) schedule();
      viewSoon();
    },
    end: () => {
      loadView();
      loadChanges();
      fill(artifacts, artifactList(run));
    },
    status: (st) => (conn.textContent = st === "live" ? "● live" : st),
  });
  const poll = setInterval(() => {
    if (view && !ENDED.has(view.state)) viewSoon();
  }, 3000);

  return {
    close() {
      stopped = true;
      stream.close();
      clearTimeout(viewTimer);
      clearInterval(poll);
    },
  };
}
