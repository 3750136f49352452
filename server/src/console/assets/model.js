// What a run's journal says, as its records stream in: each session's lifecycle
// state, turn, restarts and pauses as they happen, the master plan with its
// entries' states, and the deliveries under way (routed, not yet delivered).

/** A session's name from its URN (`cap://<fleet>/<session>`). */
export function sessionOf(urn) {
  return urn ? urn.slice(urn.lastIndexOf("/") + 1) : "";
}

/** A record's kind: its CAP event's kind, or the orchestration record's type. */
export function kindOf(rec) {
  return rec.type === "cap" && rec.event ? rec.event.kind : rec.type;
}

export class RunModel {
  constructor() {
    this.sessions = new Map();
    this.plan = new Map();
    this.planText = new Map();
    this.active = new Map();
    this.mentions = new Set();
    this.records = 0;
  }

  session(name) {
    let s = this.sessions.get(name);
    if (!s) {
      s = { state: null, turn: 0, restarts: 0, pauses: 0, pausedUntil: null };
      this.sessions.set(name, s);
    }
    return s;
  }

  /** Take one record; whether the plan or the deliveries changed. */
  take(rec) {
    this.records++;
    const name = sessionOf(rec.urn);
    switch (rec.type) {
      case "state":
        this.session(name).state = rec.to;
        return false;
      case "turn_started":
        if (rec.turn) this.session(name).turn = rec.turn;
        return false;
      case "restart":
        this.session(name).restarts++;
        return false;
      case "paused": {
        const s = this.session(name);
        s.pauses++;
        s.pausedUntil = rec.until_ms;
        return false;
      }
      case "routed":
        this.active.set(rec.key, { from: rec.from, to: rec.to, via: rec.via });
        if (rec.via === "mention") for (const f of rec.from) this.mentions.add(f + "\u0000" + rec.to);
        return true;
      case "delivered":
        return this.active.delete(rec.key);
      case "plan_entry": {
        const e = this.plan.get(rec.id) || { id: rec.id, content: this.planText.get(rec.id) || "" };
        e.assigned_to = rec.assigned_to;
        e.status = rec.status;
        this.plan.set(rec.id, e);
        return true;
      }
      case "run_ended":
        this.active.clear();
        return true;
      case "cap":
        if (rec.event && rec.event.kind === "cap.plan") {
          for (const e of rec.event.entries || []) {
            this.planText.set(e.id, e.content);
            const known = this.plan.get(e.id);
            if (known && !known.content) known.content = e.content;
          }
        }
        return false;
      default:
        return false;
    }
  }
}
