// The console's shell: the hash routes, the login gate, the header.
//
//   #/runs                              runs.js (the list, submit)
//   #/runs/<run>                        run.js (sessions, cost, plan, graph, changes)
//   #/runs/<run>/sessions/<session>     session.js (events, diff, artifacts)
//   #/approvals                         approvals.js (open asks of every run)
//
// Without a token accepted by the server only the login is shown (login.js).

import { getJson, onRefused, token } from "./api.js";
import { approvalsPage } from "./approvals.js";
import { loginPage } from "./login.js";
import { runPage } from "./run.js";
import { runsPage } from "./runs.js";
import { sessionPage } from "./session.js";

const main = document.getElementById("main");
const header = document.querySelector("header.top");
let page = null;
let me = null;
let badgeTimer = null;

function parse(hash) {
  const parts = hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (parts[0] === "runs" && parts[1] && parts[2] === "sessions" && parts[3]) {
    return { name: "session", run: parts[1], session: parts[3] };
  }
  if (parts[0] === "runs" && parts[1]) return { name: "run", run: parts[1] };
  if (parts[0] === "approvals") return { name: "approvals" };
  return { name: "runs" };
}

function close() {
  if (page && page.close) page.close();
  page = null;
}

function showLogin(error) {
  close();
  me = null;
  clearInterval(badgeTimer);
  header.hidden = true;
  page = loginPage(main, error, async (who) => {
    me = who;
    await route();
  });
}

async function badge() {
  const b = header.querySelector(".badge");
  try {
    const { asks } = await getJson("/v1/asks");
    b.textContent = String(asks.length);
    b.hidden = asks.length === 0;
  } catch (_) {
    b.hidden = true;
  }
}

async function route() {
  if (token.get() === null) return showLogin(null);
  if (!me) {
    try {
      me = await getJson("/v1/me");
    } catch (e) {
      return showLogin(e.status === 401 ? "The server refused the token: log in again." : e.message);
    }
  }
  close();
  header.hidden = false;
  header.querySelector(".who").textContent = me.name + " (" + me.role + ")";
  clearInterval(badgeTimer);
  badge();
  badgeTimer = setInterval(badge, 3000);
  const at = parse(location.hash);
  for (const a of header.querySelectorAll("nav a")) {
    const on = a.dataset.nav === (at.name === "approvals" ? "approvals" : "runs");
    if (on) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  const ctx = { me };
  if (at.name === "session") page = sessionPage(main, at.run, at.session, ctx);
  else if (at.name === "run") page = runPage(main, at.run, ctx);
  else if (at.name === "approvals") page = approvalsPage(main, ctx);
  else page = runsPage(main, ctx);
}

header.querySelector("[data-testid=logout]").addEventListener("click", () => {
  token.clear();
  showLogin(null);
});
onRefused(() => showLogin("The server refused the token: log in again."));
window.addEventListener("hashchange", () => {
  route();
  main.focus({ preventScroll: true });
});
route();
