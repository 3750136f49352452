// Building the page: elements from plain values, text always as text (agent output
// is never parsed as HTML), and the few formats every page shares.

const SVG_NS = "http://www.w3.org/2000/svg";

function apply(el, props) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.setAttribute("class", v);
    else if (k === "testid") el.dataset.testid = v;
    else if (k === "data") Object.assign(el.dataset, v);
    else if (k === "on") for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    else if (k === "text") el.textContent = v;
    else if (k === "attrs") for (const [a, x] of Object.entries(v)) el.setAttribute(a, x);
    else el[k] = v;
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** An HTML element: `h("td", {class: "num", testid: "session-cost"}, "0.01")`. */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  apply(el, props);
  append(el, children);
  return el;
}

/** An SVG element; `attrs` are set as attributes. */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
    if (k === "testid") el.dataset.testid = v;
    else if (k === "data") Object.assign(el.dataset, v);
    else el.setAttribute(k, v);
  }
  append(el, children);
  return el;
}

/** Replace `el`'s children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

export function usd(n) {
  if (n === null || n === undefined) return "–";
  return "$" + (n < 1 ? n.toFixed(4) : n.toFixed(2));
}

export function count(n) {
  if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (n >= 1e4) return (n / 1e3).toFixed(0) + "k";
  return String(n);
}

export function age(ms, now = Date.now()) {
  if (!ms) return "–";
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m";
  if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
  return Math.floor(s / 86400) + "d";
}

export function clock(ms) {
  return new Date(ms).toISOString().slice(11, 23);
}

/** A run page's or a session page's address. */
export function runHref(run, session) {
  const base = "#/runs/" + encodeURIComponent(run);
  return session === undefined ? base : base + "/sessions/" + encodeURIComponent(session);
}

/** Say something briefly in the status region. */
export function toast(text) {
  const t = document.querySelector(".toast");
  t.textContent = text;
  t.classList.add("shown");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.classList.remove("shown"), 4000);
}

/**
 * Run `fn` now, and again `ms` after each run has ended, until closed. `fn` gets
 * `stopped()` to check before it touches the page. Returns `{close(), now()}`.
 */
export function poll(ms, fn) {
  let timer = null;
  let stopped = false;
  let latest = 0;
  const tick = async () => {
    const mine = ++latest;
    clearTimeout(timer);
    await fn(() => stopped);
    // Only the latest run schedules the next (`now()` may start one mid-run).
    if (!stopped && mine === latest) timer = setTimeout(tick, ms);
  };
  tick();
  return {
    close() {
      stopped = true;
      clearTimeout(timer);
    },
    now: tick,
  };
}
