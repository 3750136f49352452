// The open permission requests and asks of every run, oldest first: the tool, its
// input, the risk and why; allow once / allow always / deny, or the ask's options
// (or a typed answer, or decline). The answer is journaled with the token's name; a
// question someone else answered first says who.

import { ApiError, getJson, postJson } from "./api.js";
import { age, fill, h, poll, runHref } from "./dom.js";

const REFRESH_MS = 2000;

function optionValue(o) {
  if (o !== null && typeof o === "object") return o.value !== undefined ? o.value : o.label;
  return o;
}

function optionLabel(o) {
  if (o !== null && typeof o === "object") return String(o.label !== undefined ? o.label : JSON.stringify(o.value));
  return String(o);
}

/**
 * An ask's choices as [label, answer]: its form's `options`, or the one question of a
 * JSON-schema form (Claude Code's AskUserQuestion: `properties.<question>.oneOf`),
 * answered as `{<question>: <label>}`, the shape its binding sends back.
 */
function choices(form) {
  if (!form) return [];
  if (Array.isArray(form.options)) return form.options.map((o) => [optionLabel(o), optionValue(o)]);
  const questions = form.properties ? Object.entries(form.properties) : [];
  if (questions.length !== 1) return [];
  const [question, p] = questions[0];
  const one = Array.isArray(p.oneOf) ? p.oneOf.map((c) => [String(c.title || c.const), c.const]) : [];
  return one.map(([label, value]) => [label, { [question]: value }]);
}

export function approvalsPage(main, ctx) {
  const list = h("ul", { class: "approvals", testid: "approvals-list" });
  const status = h("p", { class: "muted", role: "status" }, "Loading…");
  const mayAnswer = ctx.me.role === "approve" || ctx.me.role === "admin";
  fill(
    main,
    h("h1", {}, "Approvals"),
    mayAnswer ? null : h("p", { class: "warn" }, "Your token (" + ctx.me.role + ") may not answer: an approve or admin token may."),
    status,
    list,
  );
  // Questions answered here (or found answered) stay shown with what became of them.
  const closed = new Map();
  const cards = new Map();
  let poller = null;

  const keyOf = (a) => a.run + "/" + a.ask_id;

  async function answer(a, body, card) {
    for (const b of card.querySelectorAll("button, input")) b.disabled = true;
    const k = keyOf(a);
    try {
      const r = await postJson("/v1/runs/" + encodeURIComponent(a.run) + "/asks/" + encodeURIComponent(a.ask_id), body);
      closed.set(k, { a, note: h("p", { class: "ok", testid: "answered" }, "Answered by " + r.by + ".") });
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 409) {
        for (const b of card.querySelectorAll("button, input")) b.disabled = !mayAnswer;
        card.append(h("p", { class: "error", testid: "answer-error" }, "Not answered: " + e.message));
        return;
      }
      const who = e.answeredBy ? "Already answered by " + e.answeredBy + "." : "Already closed: " + e.message;
      closed.set(k, { a, note: h("p", { class: "warn", testid: "answered-by" }, who) });
    }
    poller.now();
  }

  function card(a) {
    const k = keyOf(a);
    const done = closed.get(k);
    const session = a.urn.slice(a.urn.lastIndexOf("/") + 1);
    const el = h(
      "li",
      { class: "approval " + (a.risk || ""), testid: "approval", data: { askId: a.ask_id, runId: a.run, kind: a.kind } },
      h(
        "p",
        { class: "where" },
        h("a", { href: runHref(a.run, session) }, session),
        " in run ",
        h("a", { href: runHref(a.run) }, a.run),
        " (" + a.fleet + ") · asked " + age(a.created_ms) + " ago",
      ),
    );
    if (a.kind === "permission") {
      el.append(
        h("p", {}, "Tool ", h("strong", { testid: "approval-tool" }, a.tool), " · risk ", h("span", { class: "risk " + a.risk, testid: "approval-risk" }, a.risk)),
        a.why && a.why.length ? h("ul", { class: "why", testid: "approval-why" }, a.why.map((w) => h("li", {}, w))) : null,
        h("pre", { class: "intent", testid: "approval-input" }, JSON.stringify(a.intent === undefined ? {} : a.intent, null, 2)),
      );
    } else {
      el.append(h("p", { class: "prompt", testid: "approval-prompt" }, a.prompt || ""));
    }
    if (done) {
      el.append(done.note);
      return el;
    }
    const buttons = h("div", { class: "buttons" });
    const button = (label, testid, cls, body) =>
      h("button", { type: "button", class: cls, testid, disabled: !mayAnswer, on: { click: () => answer(a, body, el) } }, label);
    if (a.kind === "permission") {
      buttons.append(
        button("Allow once", "approve-once", "primary", { decision: "allow_once" }),
        button("Allow always", "approve-always", "", { decision: "allow_always" }),
        button("Deny", "deny", "danger", { decision: "deny" }),
      );
    } else {
      const options = choices(a.form);
      if (options.length) {
        for (const [label, value] of options) buttons.append(button(label, "ask-option", "", { answer: value }));
      } else {
        const id = "answer-" + k.replace(/[^A-Za-z0-9-]/g, "_");
        const input = h("input", { id, type: "text", testid: "ask-text", disabled: !mayAnswer });
        buttons.append(
          h("label", { htmlFor: id, class: "sr-only" }, "Answer"),
          input,
          h("button", { type: "button", class: "primary", testid: "ask-answer", disabled: !mayAnswer, on: { click: () => answer(a, { answer: input.value }, el) } }, "Answer"),
        );
      }
      buttons.append(button("Decline", "deny", "danger", { decline: true }));
    }
    el.append(buttons);
    return el;
  }

  poller = poll(REFRESH_MS, async (stopped) => {
    try {
      const { asks } = await getJson("/v1/asks");
      if (stopped()) return;
      const open = new Set(asks.map(keyOf));
      const all = asks.concat([...closed.values()].filter((c) => !open.has(keyOf(c.a))).map((c) => c.a));
      // A card being answered is kept as it is (its focus, its typed answer).
      const active = document.activeElement;
      const items = all.map((a) => {
        const k = keyOf(a);
        const old = cards.get(k);
        if (old && !closed.has(k) && old.contains(active)) return old;
        const c = card(a);
        cards.set(k, c);
        return c;
      });
      fill(list, items);
      status.textContent = asks.length ? asks.length + " waiting." : "Nothing waits for an answer.";
    } catch (e) {
      status.textContent = "Cannot list the questions: " + e.message;
    }
  });
  return poller;
}
