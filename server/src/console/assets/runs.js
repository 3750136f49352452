// The runs: state, age, cost against budget, sessions, outcome, newest first,
// refreshed every two seconds; the submit form below them.

import { getJson } from "./api.js";
import { age, fill, h, poll, runHref, usd } from "./dom.js";
import { submitForm } from "./submit.js";

const REFRESH_MS = 2000;
/** Runs shown at most (the newest). */
const SHOWN = 500;

export function costCell(budget) {
  const spent = budget.spent_usd || 0;
  const limit = budget.limit_usd;
  const bar = h("span", { class: "minibar", attrs: { "aria-hidden": "true" } }, h("span", {}));
  if (limit) {
    const pct = Math.min(100, (spent / limit) * 100);
    bar.firstChild.style.width = pct.toFixed(1) + "%";
    if (spent > limit) bar.classList.add("over");
  } else {
    bar.hidden = true;
  }
  return h("td", { class: "num" }, usd(spent), limit ? " / " + usd(limit) : "", bar);
}

async function allRuns() {
  let runs = [];
  let after = null;
  for (let page = 0; page < 20; page++) {
    const q = "/v1/runs?limit=500" + (after ? "&after=" + encodeURIComponent(after) : "");
    const r = await getJson(q);
    runs = runs.concat(r.runs);
    if (!r.next_after) break;
    after = r.next_after;
  }
  return runs.slice(-SHOWN).reverse();
}

export function runsPage(main, ctx) {
  const body = h("tbody", {});
  const status = h("p", { class: "muted", role: "status" }, "Loading…");
  const table = h(
    "table",
    { class: "runs", testid: "runs-table" },
    h("caption", { class: "sr-only" }, "Runs, newest first"),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        ["Run", "Fleet", "State", "Age", "Cost / budget", "Sessions", "Outcome"].map((t) =>
          h("th", { scope: "col" }, t),
        ),
      ),
    ),
    body,
  );
  const canSubmit = ctx.me.role !== "read";
  fill(
    main,
    h("h1", {}, "Runs"),
    h("div", { class: "scroll-x" }, table),
    status,
    canSubmit ? submitForm((created) => (location.hash = runHref(created.id))) : null,
  );

  return poll(REFRESH_MS, async (stopped) => {
    try {
      const runs = await allRuns();
      if (stopped()) return;
      const now = Date.now();
      fill(
        body,
        runs.map((r) =>
          h(
            "tr",
            { testid: "run-row", data: { runId: r.id } },
            h("td", {}, h("a", { href: runHref(r.id) }, r.id)),
            h("td", {}, r.fleet || "–"),
            h("td", {}, h("span", { class: "state " + r.state, testid: "run-state" }, r.state)),
            h("td", {}, age(r.created_ms, now)),
            costCell(r.budget),
            h("td", { class: "num" }, String(r.sessions.length)),
            h("td", {}, r.outcome || (r.queue_position ? "queued #" + r.queue_position : "–")),
          ),
        ),
      );
      status.textContent = runs.length ? "" : "No runs yet.";
    } catch (e) {
      status.textContent = "Cannot list the runs: " + e.message;
    }
  });
}
