//! `speak`'s stdout, by the output format: every frame (stream-json), the last
//! result (json), the last answer's text (text); protocol lines only.

use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufWriter, Stdout};

use super::args::OutputFormat;
use super::frames::TurnEnd;

/// stdout, by the output format: every frame (stream-json), the last result (json),
/// the last answer's text (text).
pub(super) struct Out {
    format: OutputFormat,
    w: BufWriter<Stdout>,
    buf: Vec<u8>,
    last_result: Option<Value>,
    pub broken: bool,
}

impl Out {
    pub(super) fn new(format: OutputFormat) -> Self {
        Out {
            format,
            w: BufWriter::new(tokio::io::stdout()),
            buf: Vec::new(),
            last_result: None,
            broken: false,
        }
    }

    /// A frame of the stream (written only with stream-json output).
    pub(super) fn frame(&mut self, frame: &Value) {
        if self.format == OutputFormat::StreamJson {
            let mut line = frame.to_string();
            line.push('\n');
            self.line(&line);
        }
    }

    pub(super) fn frames(&mut self, frames: &[Value]) {
        for f in frames {
            self.frame(f);
        }
    }

    /// A protocol line, newline included.
    pub(super) fn line(&mut self, line: &str) {
        self.buf.extend_from_slice(line.as_bytes());
    }

    /// A turn's `result` frame.
    pub(super) fn result(&mut self, frame: Value) {
        self.frame(&frame);
        self.last_result = Some(frame);
    }

    pub(super) async fn flush(&mut self) {
        if self.buf.is_empty() || self.broken {
            return;
        }
        let ok = self.w.write_all(&self.buf).await.is_ok() && self.w.flush().await.is_ok();
        self.buf.clear();
        self.broken = !ok;
    }

    /// The end: json and text outputs say the last turn here.
    pub(super) async fn finish(&mut self, last: Option<&TurnEnd>) {
        match (self.format, last, self.last_result.take()) {
            (OutputFormat::Json, _, Some(result)) => self.line(&format!("{result}\n")),
            (OutputFormat::Text, Some(end), _) => self.line(&format!("{}\n", end.text)),
            _ => {}
        }
        self.flush().await;
    }
}
