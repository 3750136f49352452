//! Session state: which turns are used up, and the on-disk state directory
//! that lets `once` crashes stay crashed-once across restarts.

use std::io;
use std::path::PathBuf;

use crate::script::Turn;

/// The directory holding one marker file per spent `once` crash step.
#[derive(Debug, Clone, Default)]
pub(crate) struct StateDir {
    dir: Option<PathBuf>,
}

impl StateDir {
    pub(crate) fn new(dir: Option<PathBuf>) -> StateDir {
        StateDir { dir }
    }

    /// The file `name` in the state directory, if there is one (created).
    pub(crate) fn file(&self, name: &str) -> io::Result<Option<PathBuf>> {
        let Some(dir) = &self.dir else {
            return Ok(None);
        };
        std::fs::create_dir_all(dir)?;
        Ok(Some(dir.join(name)))
    }

    /// True the first time a (turn, step) asks; records the marker file
    /// `crash-t<turn>-s<step>` (0-based indices) so later runs get false.
    pub(crate) fn first_time(&self, turn: usize, step: usize) -> io::Result<bool> {
        let Some(dir) = &self.dir else {
            return Ok(true);
        };
        std::fs::create_dir_all(dir)?;
        let marker = dir.join(format!("crash-t{turn}-s{step}"));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&marker)
        {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// Picks the turn for each prompt: first an unused turn whose `match` text
/// occurs in the prompt, else the next unused turn without `match`; `None`
/// when the script is exhausted (the echo turn) — unless the script `repeat`s,
/// when every turn is unused again.
#[derive(Debug)]
pub(crate) struct TurnPicker {
    used: Vec<bool>,
    repeat: bool,
}

impl TurnPicker {
    pub(crate) fn new(turns: &[Turn]) -> TurnPicker {
        TurnPicker {
            used: vec![false; turns.len()],
            repeat: false,
        }
    }

    /// Start the script over once it is used up (the header's `repeat`).
    pub(crate) fn repeating(mut self, repeat: bool) -> TurnPicker {
        self.repeat = repeat;
        self
    }

    pub(crate) fn pick<'t>(
        &mut self,
        turns: &'t [Turn],
        prompt: &str,
    ) -> Option<(usize, &'t Turn)> {
        if self.repeat && self.used.iter().all(|u| *u) {
            self.used.iter_mut().for_each(|u| *u = false);
        }
        let unused = |i: &usize| !self.used[*i];
        let found = (0..turns.len())
            .filter(unused)
            .find(|i| {
                turns[*i]
                    .matches
                    .as_deref()
                    .is_some_and(|m| prompt.contains(m))
            })
            .or_else(|| {
                (0..turns.len())
                    .filter(unused)
                    .find(|i| turns[*i].matches.is_none())
            })?;
        self.used[found] = true;
        Some((found, &turns[found]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matched_turns_win_then_order() {
        let turns = vec![
            Turn {
                matches: None,
                steps: vec![],
            },
            Turn {
                matches: Some("deploy".into()),
                steps: vec![],
            },
        ];
        let mut picker = TurnPicker::new(&turns);
        assert_eq!(picker.pick(&turns, "please deploy").map(|t| t.0), Some(1));
        assert_eq!(picker.pick(&turns, "deploy again").map(|t| t.0), Some(0));
        assert!(picker.pick(&turns, "x").is_none());
        let mut again = TurnPicker::new(&turns).repeating(true);
        for _ in 0..3 {
            assert_eq!(again.pick(&turns, "deploy").map(|t| t.0), Some(1));
            assert_eq!(again.pick(&turns, "x").map(|t| t.0), Some(0));
        }
    }
}
