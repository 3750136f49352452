//! De-duplication of streamed text against `assistant` snapshots.
//!
//! With `--include-partial-messages`, `content_block_delta` events stream a block's
//! text, and an `assistant` snapshot of the same block (same `message.id`) follows
//! (before its `content_block_stop`). Snapshots carry one block and no index, so a
//! snapshot is matched to the first not-yet-snapshotted streamed block of the same
//! message and kind; only what the snapshot has beyond the streamed text is emitted.
//! Deltas for a block after its snapshot are dropped. Without partial messages
//! nothing is streamed and every snapshot is emitted whole.

use crate::protocol::{CapEvent, Channel, TextChunk, Thought};

use super::mapper::with_parent;

/// Bookkeeping is bounded; the oldest blocks go first.
const MAX_TRACKED_BLOCKS: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BlockKind {
    Text,
    Thinking,
}

/// A text/thinking block seen as stream deltas.
#[derive(Debug)]
struct Streamed {
    message_id: Option<String>,
    index: Option<u64>,
    kind: BlockKind,
    emitted: String,
    snapshotted: bool,
}

/// The blocks streamed in the current turn.
#[derive(Debug, Default)]
pub(super) struct StreamTracker {
    /// `message.id` of the message being streamed (from `message_start`).
    message: Option<String>,
    blocks: Vec<Streamed>,
}

impl StreamTracker {
    pub(super) fn clear(&mut self) {
        self.message = None;
        self.blocks.clear();
    }

    /// `message_start`: forgets the blocks of earlier messages.
    pub(super) fn message_start(&mut self, id: Option<&str>) {
        self.blocks
            .retain(|s| id.is_some() && s.message_id.as_deref() == id);
        if self.message.as_deref() != id {
            self.message = id.map(str::to_owned);
        }
    }

    /// Records a delta; `None` when it is late (its block was snapshotted), else the
    /// message id to emit it under.
    pub(super) fn delta(
        &mut self,
        index: Option<u64>,
        kind: BlockKind,
        text: &str,
    ) -> Option<Option<&str>> {
        let mid = self.message.as_deref();
        let pos = self
            .blocks
            .iter()
            .position(|s| s.index == index && s.kind == kind && s.message_id.as_deref() == mid);
        let pos = match pos {
            Some(p) if self.blocks[p].snapshotted => return None,
            Some(p) => p,
            None => {
                if self.blocks.len() >= MAX_TRACKED_BLOCKS {
                    self.blocks.remove(0);
                }
                self.blocks.push(Streamed {
                    message_id: mid.map(str::to_owned),
                    index,
                    kind,
                    emitted: String::new(),
                    snapshotted: false,
                });
                self.blocks.len() - 1
            }
        };
        self.blocks[pos].emitted.push_str(text);
        Some(self.message.as_deref())
    }

    /// The part of a snapshot block's `text` not streamed already (maybe empty).
    pub(super) fn snapshot<'t>(
        &mut self,
        mid: Option<&str>,
        kind: BlockKind,
        text: &'t str,
    ) -> &'t str {
        let found = self
            .blocks
            .iter_mut()
            .find(|s| !s.snapshotted && s.kind == kind && s.message_id.as_deref() == mid);
        match found {
            Some(s) => {
                s.snapshotted = true;
                let rest = text.strip_prefix(s.emitted.as_str()).unwrap_or("");
                s.emitted.push_str(rest);
                rest
            }
            None => text,
        }
    }
}

/// `cap.text_chunk` (assistant channel) or `cap.thought`.
pub(super) fn block_event(
    kind: BlockKind,
    mid: Option<&str>,
    text: &str,
    parent: Option<&str>,
) -> CapEvent {
    let message_id = mid.map(str::to_owned).into();
    let event = match kind {
        BlockKind::Text => CapEvent::TextChunk(TextChunk {
            message_id,
            text: text.to_owned(),
            channel: Some(Channel::Assistant),
            ..Default::default()
        }),
        BlockKind::Thinking => CapEvent::Thought(Thought {
            message_id,
            text: text.to_owned(),
            ..Default::default()
        }),
    };
    with_parent(event, parent)
}
