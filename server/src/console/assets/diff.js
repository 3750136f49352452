// A coding session's final diff, file by file, with the vetting findings on each
// file beside it (a finding on no file of the diff is listed above it).

import { fill, h } from "./dom.js";

/** Lines rendered at most, across files (the rest is in the downloadable artifact). */
const LINES_MAX = 20000;

/** A unified diff split into files: `{path, lines}`. */
export function parseDiff(text) {
  const files = [];
  let cur = null;
  for (const line of text.split("\n")) {
    if (line.startsWith("diff --git ")) {
      const m = / b\/(.*)$/.exec(line);
      cur = { path: m ? m[1] : line.slice(11), lines: [] };
      files.push(cur);
      continue;
    }
    if (!cur) {
      cur = { path: "(diff)", lines: [] };
      files.push(cur);
    }
    if (line.startsWith("+++ b/") && cur.lines.length < 6) cur.path = line.slice(6);
    cur.lines.push(line);
  }
  return files.filter((f) => f.lines.some((l) => l !== ""));
}

function kindOf(line) {
  if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("index ") || line.startsWith("new file") || line.startsWith("deleted file")) return "meta";
  if (line.startsWith("@@")) return "hunk";
  if (line.startsWith("+")) return "add";
  if (line.startsWith("-")) return "del";
  return "ctx";
}

function findingItem(f) {
  return h(
    "li",
    { class: "diff-finding " + f.reason, testid: "diff-finding", data: { path: f.path, reason: f.reason } },
    h("strong", {}, f.reason.replaceAll("_", " ")),
    f.line ? " (line " + f.line + ")" : "",
    ": ",
    f.message,
  );
}

/** The diff `text` with `findings` (`{path, reason, message, line}`) beside their files. */
export function renderDiff(text, findings) {
  const files = parseDiff(text);
  const paths = new Set(files.map((f) => f.path));
  const stray = findings.filter((f) => !paths.has(f.path));
  let budget = LINES_MAX;
  const out = h("div", { class: "diff", testid: "diff" });
  if (stray.length) out.append(h("ul", { class: "findings" }, stray.map(findingItem)));
  for (const f of files) {
    const mine = findings.filter((x) => x.path === f.path);
    const adds = f.lines.filter((l) => l.startsWith("+") && !l.startsWith("+++")).length;
    const dels = f.lines.filter((l) => l.startsWith("-") && !l.startsWith("---")).length;
    const shown = f.lines.slice(0, Math.max(0, budget));
    budget -= shown.length;
    const code = h("pre", { class: "code" });
    fill(
      code,
      shown.map((l) => h("span", { class: "line " + kindOf(l) }, l + "\n")),
      shown.length < f.lines.length ? h("span", { class: "line meta" }, "… " + (f.lines.length - shown.length) + " more lines in the artifact\n") : "",
    );
    out.append(
      h(
        "section",
        { class: "diff-file" + (mine.length ? " flagged" : ""), testid: "diff-file", data: { path: f.path } },
        h("h3", {}, h("span", { class: "mono" }, f.path), h("span", { class: "muted" }, " +" + adds + " −" + dels)),
        mine.length ? h("ul", { class: "findings" }, mine.map(findingItem)) : null,
        h("div", { class: "scroll-x" }, code),
      ),
    );
  }
  if (!files.length) out.append(h("p", { class: "muted" }, "The diff is empty."));
  return out;
}
