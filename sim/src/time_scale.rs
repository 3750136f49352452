//! `--time-scale N` (`CAPFLEET_SIM_TIME_SCALE`): every delay of a script divided by
//! `N`, so that a script written in real time (a turn of two minutes' work, a slow
//! boot) runs hours of scripted work in minutes — the chaos soak's compressed time.
//! The script is scaled once, when loaded; what the steps do is unchanged.

use std::time::Duration;

use super::script::Script;
use super::script::steps::Step;

/// A time scale: how many times faster than written the script runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TimeScale(f64);

impl TimeScale {
    /// Parse a scale: a finite number of at least 1 (`600`: ten minutes pass per second).
    pub(crate) fn parse(text: &str) -> Result<TimeScale, String> {
        match text.trim().parse::<f64>() {
            Ok(n) if n.is_finite() && n >= 1.0 => Ok(TimeScale(n)),
            _ => Err(format!(
                "invalid time scale `{text}`: expected a number of at least 1 (e.g. 600: \
                 ten minutes of scripted time per second)"
            )),
        }
    }

    /// `ms` of scripted time, in real milliseconds (never rounded up from 0).
    fn ms(self, ms: u64) -> u64 {
        let d = Duration::from_millis(ms).div_f64(self.0);
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
    }
}

impl Script {
    /// This script with every delay divided by `scale`.
    pub(super) fn compressed(mut self, scale: TimeScale) -> Script {
        let h = &mut self.header;
        h.boot_delay_ms = scale.ms(h.boot_delay_ms);
        h.chunk_delay_ms = scale.ms(h.chunk_delay_ms);
        for step in self.turns.iter_mut().flat_map(|t| t.steps.iter_mut()) {
            match step {
                Step::Say { delay_ms, .. } => *delay_ms = delay_ms.map(|d| scale.ms(d)),
                Step::Tool(tool) => tool.duration_ms = scale.ms(tool.duration_ms),
                Step::Sleep(ms) | Step::Pace(ms) => *ms = scale.ms(*ms),
                Step::Late { delay_ms, .. } => *delay_ms = scale.ms(*delay_ms),
                Step::Think(_)
                | Step::Plan(_)
                | Step::Ask(_)
                | Step::Usage(_)
                | Step::Crash(_)
                | Step::Hang
                | Step::DropStream
                | Step::Flood { .. }
                | Step::Raw(_)
                | Step::Oversize { .. }
                | Step::Echo
                | Step::Escape
                | Step::Error { .. }
                | Step::Rpc { .. }
                | Step::Run { .. }
                | Step::Edit(_)
                | Step::Artifact { .. } => {}
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script;

    #[test]
    fn every_delay_is_divided_and_nothing_else_changes() {
        let text = "boot_delay_ms = 6000\nchunk_delay_ms = 600\n[[turn]]\nsteps = [\
            { say = \"hi\", delay_ms = 1200 }, { sleep_ms = 120000 }, \
            { tool = \"Bash\", input = {}, duration_ms = 60000 }, { say = \"x\" }, \
            { pace_ms = 6000 }]\n";
        let s = script::parse("<t>", text)
            .unwrap()
            .compressed(TimeScale::parse("600").unwrap());
        assert_eq!((s.header.boot_delay_ms, s.header.chunk_delay_ms), (10, 1));
        let steps = &s.turns[0].steps;
        assert!(matches!(
            steps[0],
            Step::Say {
                delay_ms: Some(2),
                ..
            }
        ));
        assert!(matches!(steps[1], Step::Sleep(200)));
        assert!(matches!(&steps[2], Step::Tool(t) if t.duration_ms == 100));
        assert!(matches!(steps[3], Step::Say { delay_ms: None, .. }));
        assert!(matches!(steps[4], Step::Pace(10)));
    }

    #[test]
    fn a_scale_below_one_or_no_number_is_refused_with_the_fix() {
        for bad in ["0", "0.5", "-3", "fast", "inf", "NaN"] {
            let e = TimeScale::parse(bad).unwrap_err();
            assert!(e.contains("at least 1"), "{bad}: {e}");
        }
        assert_eq!(TimeScale::parse(" 1 ").unwrap(), TimeScale(1.0));
    }
}
