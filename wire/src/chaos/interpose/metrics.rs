//! What the interposer and the connection faults count into a run's Prometheus
//! registry (`capfleet_chaos_io_faults_total`, `capfleet_chaos_bytes_garbled_total`,
//! `capfleet_chaos_frames_truncated_total`): handles the run's
//! `FleetMetrics` (the engine's telemetry) registers and hands to
//! the chaos scheduler.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::ByteStats;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IoFaultLabels {
    pub session: String,
    /// `garble`, `truncate`, `slow`, `stall_stdin`, `latency`, `drop`, `http_5xx`,
    /// `refuse`.
    pub fault: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct IoSessionLabels {
    pub session: String,
}

/// The counters, shared by every session's handles.
#[derive(Debug, Clone, Default)]
pub struct IoMetrics {
    /// Byte and connection faults applied, by session and kind.
    pub faults: Family<IoFaultLabels, Counter>,
    /// Bytes `garble` replaced, by session.
    pub bytes_garbled: Family<IoSessionLabels, Counter>,
    /// Frames `truncate` cut, by session.
    pub frames_truncated: Family<IoSessionLabels, Counter>,
}

impl IoMetrics {
    pub(crate) fn fault(&self, session: &str, kind: &str) {
        self.faults
            .get_or_create(&IoFaultLabels {
                session: session.to_owned(),
                fault: kind.to_owned(),
            })
            .inc();
    }

    /// Counts what changed between two readings of a session's [`ByteStats`].
    pub(super) fn bytes(&self, session: &str, before: &ByteStats, after: &ByteStats) {
        let labels = || IoSessionLabels {
            session: session.to_owned(),
        };
        let garbled = after.bytes_garbled - before.bytes_garbled;
        if garbled > 0 {
            self.bytes_garbled.get_or_create(&labels()).inc_by(garbled);
        }
        let cut = after.frames_truncated - before.frames_truncated;
        if cut > 0 {
            self.frames_truncated.get_or_create(&labels()).inc_by(cut);
        }
    }
}
