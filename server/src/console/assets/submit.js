// Submitting a fleet: pasted or uploaded fleet.toml (and the files it names beside
// it), checked by the server (POST /v1/fleets/validate) as it is typed, each finding
// shown against its line, then submitted (POST /v1/runs).

import { ApiError, postJson } from "./api.js";
import { fill, h } from "./dom.js";

const CHECK_AFTER_MS = 400;

function readFile(file) {
  return new Promise((res, rej) => {
    const r = new FileReader();
    r.onload = () => res(String(r.result));
    r.onerror = () => rej(r.error);
    r.readAsText(file);
  });
}

/** The character range of line `n` (1-based) of `text`. */
function lineRange(text, n) {
  let start = 0;
  for (let i = 1; i < n; i++) {
    const nl = text.indexOf("\n", start);
    if (nl < 0) return [text.length, text.length];
    start = nl + 1;
  }
  const end = text.indexOf("\n", start);
  return [start, end < 0 ? text.length : end];
}

export function submitForm(created) {
  const area = h("textarea", {
    id: "fleet-toml",
    testid: "fleet-toml",
    rows: 14,
    spellcheck: false,
    wrap: "off",
    placeholder: '[fleet]\nname = "demo"\nstart = "a"\ntask = "…"\n\n[[sessions]]\nname = "a"\nagent = "sim"',
  });
  const gutter = h("pre", { class: "gutter", attrs: { "aria-hidden": "true" } });
  const upload = h("input", { id: "fleet-upload", type: "file", accept: ".toml,text/plain", testid: "fleet-upload" });
  const extra = h("input", { id: "fleet-files", type: "file", multiple: true, testid: "fleet-files" });
  const task = h("input", { id: "fleet-task", type: "text", testid: "fleet-task", placeholder: "the fleet's own" });
  const findings = h("ul", { class: "findings", testid: "validate-findings", attrs: { "aria-live": "polite" } });
  const verdict = h("p", { class: "muted", testid: "validate-verdict", role: "status" });
  const submit = h("button", { type: "submit", class: "primary", testid: "submit-run" }, "Submit run");
  let files = {};
  let bad = new Set();
  let timer = null;
  let checked = 0;

  function numbers() {
    const lines = area.value.split("\n").length;
    const out = [];
    for (let i = 1; i <= lines; i++) {
      out.push(h("span", { class: bad.has(i) ? "bad" : "" }, String(i)), "\n");
    }
    fill(gutter, out);
    gutter.scrollTop = area.scrollTop;
  }

  function body() {
    const b = { fleet: area.value, files };
    if (task.value.trim()) b.task = task.value.trim();
    return b;
  }

  function show(list, warnings) {
    bad = new Set(list.filter((f) => f.line).map((f) => f.line));
    fill(
      findings,
      list.map((f) =>
        h(
          "li",
          { class: "finding", testid: "finding", data: { line: f.line ? String(f.line) : "" } },
          f.line
            ? h(
                "button",
                {
                  type: "button",
                  class: "link",
                  on: {
                    click: () => {
                      const [a, b] = lineRange(area.value, f.line);
                      area.focus();
                      area.setSelectionRange(a, b);
                    },
                  },
                },
                "line " + f.line,
              )
            : null,
          " ",
          f.message,
        ),
      ),
      (warnings || []).map((w) => h("li", { class: "warning", testid: "warning" }, w)),
    );
    numbers();
  }

  async function check() {
    const n = ++checked;
    if (!area.value.trim()) {
      show([], []);
      verdict.textContent = "";
      return null;
    }
    try {
      const v = await postJson("/v1/fleets/validate", body());
      if (n !== checked) return null;
      show(v.findings, v.warnings);
      verdict.textContent = v.valid
        ? "Valid: fleet " + v.fleet + ", " + v.sessions + " session(s)."
        : v.findings.length + " finding(s).";
      verdict.className = v.valid ? "ok" : "error";
      return v;
    } catch (e) {
      if (n === checked) {
        show([], []);
        verdict.textContent = "Cannot check it: " + e.message;
        verdict.className = "error";
      }
      return null;
    }
  }

  function later() {
    clearTimeout(timer);
    numbers();
    timer = setTimeout(check, CHECK_AFTER_MS);
  }

  area.addEventListener("input", later);
  area.addEventListener("scroll", () => (gutter.scrollTop = area.scrollTop));
  task.addEventListener("input", later);
  upload.addEventListener("change", async () => {
    if (!upload.files[0]) return;
    area.value = await readFile(upload.files[0]);
    later();
  });
  extra.addEventListener("change", async () => {
    files = {};
    for (const f of extra.files) files[f.name] = await readFile(f);
    later();
  });

  const form = h(
    "form",
    {
      class: "submit",
      on: {
        submit: async (e) => {
          e.preventDefault();
          clearTimeout(timer);
          submit.disabled = true;
          try {
            const v = await check();
            if (!v || !v.valid) return;
            created(await postJson("/v1/runs", body()));
          } catch (x) {
            if (x instanceof ApiError && x.findings.length) show(x.findings, []);
            verdict.textContent = "Not submitted: " + x.message;
            verdict.className = "error";
          } finally {
            submit.disabled = false;
          }
        },
      },
    },
    h("h2", {}, "Submit a fleet"),
    h("label", { htmlFor: "fleet-toml" }, "fleet.toml"),
    h("div", { class: "editor" }, gutter, area),
    h(
      "div",
      { class: "row" },
      h("label", { htmlFor: "fleet-upload" }, "Upload a fleet.toml ", upload),
      h("label", { htmlFor: "fleet-files" }, "Files beside it (scripts, @task files) ", extra),
      h("label", { htmlFor: "fleet-task" }, "Task ", task),
    ),
    verdict,
    findings,
    submit,
  );
  numbers();
  return form;
}
