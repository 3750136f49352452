// A session's events: kept as compact records (at most MAX_EVENTS; the oldest go
// first), shown in a windowed list — only the rows in view and a margin are in the
// DOM, at fixed heights, so 100,000 events keep the page responsive and nothing
// moves while they stream. Filterable by kind; text is text; a tool call's input and
// output fold out.

import { clock, fill, h } from "./dom.js";
import { kindOf } from "./model.js";

export const MAX_EVENTS = 100000;
const ROW = 24;
const OPEN = 216;
const MARGIN = 12;
const TEXT_MAX = 600;
const DETAIL_MAX = 4000;
const FOLDING = new Set(["cap.tool_call.start", "cap.tool_call.end", "cap.permission.request", "cap.ask_user", "turn_started", "cap.error"]);

function cut(s, n) {
  if (s.length <= n) return s;
  return s.slice(0, n) + "… (" + (s.length - n) + " more characters in the journal)";
}

function json(v) {
  try {
    return JSON.stringify(v, null, 2);
  } catch (_) {
    return String(v);
  }
}

/** What a row says of a record, and what folds out of it. */
function describe(rec) {
  const e = rec.event || {};
  switch (kindOf(rec)) {
    case "cap.text_chunk":
    case "cap.thought":
      return [e.text || "", null];
    case "cap.tool_call.start":
      return [(e.name || "tool") + " " + (e.input ? JSON.stringify(e.input) : ""), e.input ? json(e.input) : null];
    case "cap.tool_call.delta":
      return [e.call_id + " …", null];
    case "cap.tool_call.end":
      return [
        (e.is_error ? "failed" : "done") + (e.duration_ms ? " in " + e.duration_ms + " ms" : "") + " " + (e.call_id || ""),
        e.output === undefined ? null : typeof e.output === "string" ? e.output : json(e.output),
      ];
    case "cap.permission.request":
      return [(e.tool || "") + " (risk " + (e.risk_level || "?") + ")", json(e.intent === undefined ? {} : e.intent)];
    case "cap.permission.response":
      return [e.decision + " (" + ((e._meta && e._meta["capfleet.rule"]) || "") + ")", null];
    case "cap.ask_user":
      return [e.prompt || "", e.form ? json(e.form) : null];
    case "cap.usage":
      return [
        (e.input_tokens || 0) + " in / " + (e.output_tokens || 0) + " out" + (e.cost_usd !== undefined ? " · $" + e.cost_usd : ""),
        null,
      ];
    case "cap.error":
      return [(e.code || "") + ": " + (e.message || ""), e.details ? json(e.details) : null];
    case "state":
      return [rec.from + " → " + rec.to, null];
    case "turn_started":
      return ["turn " + rec.turn + " (attempt " + rec.attempt + ")", rec.prompt || rec.prompt_ref || null];
    case "turn_ended":
      return [rec.outcome + " · " + rec.stop_reason + " · " + rec.duration_ms + " ms", null];
    case "restart":
      return ["restart " + rec.attempt + " in " + rec.delay_ms + " ms", null];
    case "paused":
      return ["paused until " + new Date(rec.until_ms).toLocaleTimeString() + ": " + rec.reason, null];
    default: {
      if (rec.type === "cap") {
        const rest = Object.assign({}, e);
        delete rest.kind;
        return [JSON.stringify(rest), null];
      }
      const rest = Object.assign({}, rec);
      for (const k of ["seq", "urn", "turn", "ts_ms", "type"]) delete rest[k];
      return [JSON.stringify(rest), null];
    }
  }
}

/** The events of one session, compact, bounded. */
export class EventStore {
  constructor(onKind) {
    this.items = [];
    this.dropped = 0;
    this.kinds = new Set();
    this.onKind = onKind;
  }

  add(id, rec) {
    const kind = kindOf(rec);
    if (!this.kinds.has(kind)) {
      this.kinds.add(kind);
      this.onKind(kind);
    }
    const [text, detail] = describe(rec);
    this.items.push({
      id,
      ts: rec.ts_ms,
      kind,
      turn: rec.turn || 0,
      text: cut(String(text), TEXT_MAX),
      detail: detail === null ? null : cut(String(detail), DETAIL_MAX),
    });
    if (this.items.length > MAX_EVENTS) {
      const drop = Math.ceil(MAX_EVENTS / 10);
      this.items = this.items.slice(drop);
      this.dropped += drop;
      return true;
    }
    return false;
  }
}

/** The windowed list over `store`, with its kind filter. */
export function eventList(store) {
  const select = h("select", { id: "event-filter", testid: "event-filter" }, h("option", { value: "" }, "every kind"));
  const count = h("span", { class: "muted", role: "status", testid: "event-count" });
  const spacer = h("div", { class: "spacer" });
  const layer = h("div", { class: "layer" });
  const box = h(
    "div",
    { class: "events", testid: "event-list", tabIndex: 0, attrs: { role: "list", "aria-label": "Events" } },
    spacer,
    layer,
  );
  let shown = [];
  let open = new Set();
  let due = false;
  let follow = true;

  const matches = (it) => !select.value || it.kind === select.value;

  function refilter() {
    shown = [];
    store.items.forEach((it, i) => matches(it) && shown.push(i));
  }

  function openPositions() {
    const out = [];
    for (const id of open) {
      const p = bsearch((i) => store.items[i].id >= id);
      if (p < shown.length && store.items[shown[p]].id === id) out.push(p);
    }
    return out;
  }

  // The first position whose test holds (the test is monotone over `shown`).
  function bsearch(test) {
    let lo = 0;
    let hi = shown.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (test(shown[mid])) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }

  const top = (pos, opened) => pos * ROW + opened.filter((p) => p < pos).length * (OPEN - ROW);

  function render() {
    due = false;
    const opened = openPositions();
    const total = top(shown.length, opened);
    spacer.style.height = total + "px";
    if (follow) box.scrollTop = total;
    const from = box.scrollTop;
    const to = from + box.clientHeight;
    let lo = 0;
    let hi = shown.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (top(mid + 1, opened) <= from) lo = mid + 1;
      else hi = mid;
    }
    const first = Math.max(0, lo - MARGIN);
    const rows = [];
    for (let p = first; p < shown.length; p++) {
      const y = top(p, opened);
      if (y > to + MARGIN * ROW) break;
      rows.push(row(store.items[shown[p]], y));
    }
    fill(layer, rows);
    count.textContent =
      shown.length + (select.value ? " of " + store.items.length : "") + " event(s)" + (store.dropped ? " · the oldest " + store.dropped + " let go (kept: " + store.items.length + ")" : "");
  }

  function row(it, y) {
    const isOpen = open.has(it.id);
    const el = h(
      "div",
      { class: "ev k-" + it.kind.replaceAll(".", "-") + (isOpen ? " open" : ""), testid: "event-row", attrs: { role: "listitem" }, data: { kind: it.kind, id: String(it.id) } },
      h("span", { class: "t" }, it.ts ? clock(it.ts) : ""),
      h("span", { class: "k" }, it.kind),
      h("span", { class: "n" }, it.turn ? "#" + it.turn : ""),
      it.detail !== null
        ? h(
            "button",
            {
              type: "button",
              class: "fold",
              testid: "event-fold",
              attrs: { "aria-expanded": String(isOpen) },
              on: {
                click: () => {
                  if (isOpen) open.delete(it.id);
                  else open.add(it.id);
                  follow = false;
                  soon();
                },
              },
            },
            isOpen ? "▾" : "▸",
          )
        : h("span", { class: "fold" }),
      h("span", { class: "x" }, it.text),
      isOpen ? h("pre", { class: "detail", testid: "event-detail" }, it.detail) : null,
    );
    el.style.top = y + "px";
    el.style.height = (isOpen ? OPEN : ROW) + "px";
    return el;
  }

  function soon() {
    if (!due) {
      due = true;
      requestAnimationFrame(render);
    }
  }

  box.addEventListener("scroll", () => {
    follow = box.scrollTop + box.clientHeight >= box.scrollHeight - ROW;
    soon();
  });
  select.addEventListener("change", () => {
    refilter();
    follow = true;
    soon();
  });

  return {
    element: h(
      "div",
      { class: "eventpane" },
      h("div", { class: "row" }, h("label", { htmlFor: "event-filter" }, "Kind "), select, count),
      box,
    ),
    addKind(kind) {
      const chosen = select.value;
      const opts = [...select.options].slice(1).map((o) => o.value).concat(kind).sort();
      fill(select, h("option", { value: "" }, "every kind"), opts.map((k) => h("option", { value: k }, k)));
      select.value = chosen;
    },
    /** The store took a record (`dropped`: its oldest were let go). */
    added(dropped) {
      if (dropped) refilter();
      else {
        const i = store.items.length - 1;
        if (matches(store.items[i])) shown.push(i);
      }
      soon();
    },
  };
}
