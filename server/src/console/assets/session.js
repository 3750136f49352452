// A session of a run: its row (state, turn, tokens, cost, restarts, pauses), its
// event stream (its records only, streamed over SSE and resumed with
// Last-Event-ID), its final diff with the vetting findings, its artifacts.

import { getJson, getText } from "./api.js";
import { count, fill, h, runHref, usd } from "./dom.js";
import { EventStore, eventList } from "./events.js";
import { sessionOf } from "./model.js";
import { artifactList } from "./run.js";
import { renderDiff } from "./diff.js";
import { follow } from "./sse.js";

const VIEW_EVERY_MS = 700;

export function sessionPage(main, run, session, _ctx) {
  const enc = encodeURIComponent(run);
  const facts = h("dl", { class: "facts", testid: "session-row", data: { session } });
  const conn = h("span", { class: "conn muted", role: "status", testid: "stream-status" }, "connecting…");
  const diffBox = h("div", {}, h("p", { class: "muted" }, "Looking for a diff…"));
  let list = null;
  const store = new EventStore((kind) => list && list.addKind(kind));
  list = eventList(store);
  fill(
    main,
    h("p", {}, h("a", { href: runHref(run) }, "← Run " + run)),
    h("div", { class: "titlebar" }, h("h1", {}, "Session ", h("span", { class: "mono" }, session)), conn),
    facts,
    h("h2", {}, "Events"),
    list.element,
    h("h2", {}, "Changes"),
    diffBox,
    h("h2", {}, "Artifacts"),
    artifactList(run, session),
  );

  let state = null;
  let viewDue = false;
  let viewTimer = null;
  let stopped = false;

  async function loadView() {
    viewDue = false;
    try {
      const v = await getJson("/v1/runs/" + enc);
      const s = v.sessions.find((x) => x.name === session);
      if (stopped || !s) return;
      const fact = (dt, testid, dd) => [h("dt", {}, dt), h("dd", { testid }, dd)];
      fill(
        facts,
        fact("State", "session-state", h("span", { class: "state " + (state || s.state) }, state || s.state)),
        fact("Turn", "session-turn", String(s.turns)),
        fact("Tokens", "session-tokens", count(s.input_tokens) + " in / " + count(s.output_tokens) + " out"),
        fact("Cost", "session-cost", usd(s.cost_usd)),
        fact("Restarts", "session-restarts", String(s.restarts)),
        fact("Pauses", "session-pauses", String(s.pauses || 0)),
        v.trace_url ? fact("Trace", "trace-link", h("a", { href: v.trace_url, target: "_blank", rel: "noopener noreferrer" }, "in Jaeger")) : [],
      );
    } catch (e) {
      fill(facts, h("dd", { class: "error" }, "Cannot read the run: " + e.message));
    }
  }

  async function loadDiff() {
    try {
      const c = await getJson("/v1/runs/" + enc + "/changes");
      const mine = c.sessions.find((s) => s.session === session);
      if (!mine) {
        fill(diffBox, h("p", { class: "muted", testid: "no-diff" }, "No changes (a coding session's diff comes at the run's end)."));
        return;
      }
      const text = mine.diff ? await getText(mine.diff) : "";
      fill(diffBox, renderDiff(text, mine.findings));
    } catch (e) {
      fill(diffBox, h("p", { class: "error" }, "Cannot read the diff: " + e.message));
    }
  }

  loadView();
  loadDiff();
  const stream = follow("/v1/runs/" + enc + "/events?session=" + encodeURIComponent(session), {
    record: (id, data) => {
      let rec;
      try {
        rec = JSON.parse(data);
      } catch (_) {
        return;
      }
      if (sessionOf(rec.urn) !== session) return;
      if (rec.type === "state") state = rec.to;
      list.added(store.add(id, rec));
      if (!viewDue) {
        viewDue = true;
        viewTimer = setTimeout(loadView, VIEW_EVERY_MS);
      }
    },
    end: () => {
      loadView();
      loadDiff();
    },
    status: (st) => (conn.textContent = st === "live" ? "● live" : st),
  });
  return {
    close() {
      stopped = true;
      stream.close();
      clearTimeout(viewTimer);
    },
  };
}
