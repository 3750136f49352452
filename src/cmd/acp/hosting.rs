//! What `capfleet acp` hosts: sessions of one agent (`--agent`, [`super::host`]) or
//! conversations with a fleet (`--fleet`, [`super::fleet`]), behind one face for the
//! server.

use std::path::Path;

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;

use super::fleet::FleetHost;
use super::host::{Ended, Host, HostError};

pub(super) enum Hosting {
    Agent(Host),
    Fleet(FleetHost),
}

impl Hosting {
    /// `session/new`.
    pub(super) async fn open_new(
        &self,
        cwd: &Path,
        cx: &ConnectionTo<Client>,
    ) -> Result<String, HostError> {
        match self {
            Hosting::Agent(h) => h.open_new(cwd, cx).await,
            Hosting::Fleet(h) => h.open_new(cwd, cx).await,
        }
    }

    /// `session/load`: the record of session `id`, gone on with in `cwd`.
    pub(super) async fn open_loaded(
        &self,
        id: &str,
        cwd: &Path,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), HostError> {
        let mut record = match self {
            Hosting::Agent(h) => h.recorded(id).await?,
            Hosting::Fleet(h) => h.recorded(id).await?,
        };
        record.cwd = cwd.to_path_buf();
        match self {
            Hosting::Agent(h) => h.reopen(record, cx).await,
            Hosting::Fleet(h) => h.reopen(record, cx).await,
        }
    }

    /// `session/prompt`: one turn, its updates all sent before it returns.
    pub(super) async fn prompt(&self, id: &str, prompt: String) -> Result<Ended, HostError> {
        match self {
            Hosting::Agent(h) => h.prompt(id, prompt).await,
            Hosting::Fleet(h) => h.prompt(id, prompt).await,
        }
    }

    /// `session/cancel`.
    pub(super) fn cancel(&self, id: &str) {
        match self {
            Hosting::Agent(h) => h.cancel(id),
            Hosting::Fleet(h) => h.cancel(id),
        }
    }

    /// The ACP session a question of the agents' tree belongs to (a fleet's
    /// conversations put their own questions to the client).
    pub(super) fn session_of(&self, urn: &str) -> Option<String> {
        match self {
            Hosting::Agent(h) => h.session_of(urn),
            Hosting::Fleet(_) => None,
        }
    }
}
