//! The tools' metric: every call counted by tool and result (`ok`, or the refusal's
//! code), as `capfleet_server_mcp_tool_calls_total` in `serve`'s `/metrics`.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    /// The tool's name (one of the server's, never a client's string: an unknown
    /// tool counts as `unknown`).
    pub tool: String,
    /// `ok`, or the refusal's code (`forbidden`, `run_not_found`, …).
    pub result: String,
}

/// The tool calls, by tool and result. Clones count into the same family.
#[derive(Debug, Clone, Default)]
pub struct McpMetrics {
    pub calls: Family<CallLabels, Counter>,
}

impl McpMetrics {
    /// The metrics, registered in `registry`.
    pub fn register(registry: &mut Registry) -> McpMetrics {
        let m = McpMetrics::default();
        registry.register(
            "mcp_tool_calls",
            "Tool calls over MCP, by tool and result",
            m.calls.clone(),
        );
        m
    }

    pub(crate) fn count(&self, tool: &str, result: &str) {
        self.calls
            .get_or_create(&CallLabels {
                tool: tool.to_owned(),
                result: result.to_owned(),
            })
            .inc();
    }
}
