//! What the router runs: the engine's description of a fleet's routing, built by the
//! application from `fleet.toml` (already validated: every name is a session, no
//! cycle without an exit).

/// Where a session's output goes when its turn ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// Sessions that must all be done (one = a pipeline step, more = a join): idle,
    /// nothing queued for them, none of their plan entries open.
    pub when: Vec<String>,
    pub action: RouteAction,
}

/// What a route does once its `when` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouteAction {
    /// Hand the output to one session (pipeline).
    To(String),
    /// Hand it to several sessions: the same text to each, or one subtask each taken
    /// from a fenced `cap-subtasks` JSON block in the output.
    FanOut { to: Vec<String>, split: Split },
    /// A race: the candidates' results (the first to finish, or all) go to a picker.
    Collect { picker: Picker, mode: CollectMode },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    Broadcast,
    BySubtask,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Picker {
    /// The human at the terminal (or, with none, the first result wins: fail-safe).
    Human,
    Session(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CollectMode {
    /// The first candidate to finish wins; the others are cancelled.
    First,
    /// Wait for every candidate, hand all results over.
    All,
}

/// A fleet's routing: who gets the task, and the routes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutingSpec {
    /// Sessions that receive the task first.
    pub start: Vec<String>,
    /// The task.
    pub task: String,
    pub routes: Vec<Route>,
    /// Turns started at once across the fleet at most (0 = no limit); extra turns queue.
    pub max_concurrent: usize,
    /// The order of a busy session's queue.
    pub queue: QueueOrder,
}

/// The order in which a busy session gets what was delivered to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum QueueOrder {
    /// Its master-plan entries before the mentions and route deliveries that arrived
    /// after the plan was adopted (the plan is the work asked for first).
    #[default]
    PlanFirst,
    /// Strictly in the order of arrival.
    Arrival,
}

impl QueueOrder {
    /// Every order with its fleet-file name.
    pub const NAMES: &[(QueueOrder, &str)] = &[
        (QueueOrder::PlanFirst, "plan_first"),
        (QueueOrder::Arrival, "arrival"),
    ];

    /// The fleet-file name.
    pub fn as_str(self) -> &'static str {
        match self {
            QueueOrder::PlanFirst => "plan_first",
            QueueOrder::Arrival => "arrival",
        }
    }
}
