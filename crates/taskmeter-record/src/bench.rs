//! `Bench`: named scenarios and inputs, warm-up and measurement, in this process.

use crate::analysis::{analyze, Analysis};
use crate::clock::now_ns;
use crate::local::{Job, Window};
use crate::recorder::Recorder;
use crate::report::{Config, Report, ScenarioResult, SCHEMA};
use std::time::Duration;

type Body<I> = Box<dyn FnMut(&Recorder, &I)>;

/// A benchmark of asynchronous work: each scenario's body is run again and again, each time
/// with a [`Recorder`] it hands to the work it starts; the work calls `record()` when a unit
/// completes. Defaults as Benchee's: warm-up 2 s, time 5 s; drain 1 s.
pub struct Bench<I = ()> {
    config: Config,
    inputs: Vec<(Option<String>, I)>,
    scenarios: Vec<(String, Body<I>)>,
    print: bool,
}

impl Bench<()> {
    /// A benchmark whose scenarios take no input.
    pub fn new() -> Bench<()> {
        Bench::build(vec![(None, ())])
    }
}

impl Default for Bench<()> {
    fn default() -> Self {
        Bench::new()
    }
}

impl<I> Bench<I> {
    /// A benchmark that runs every scenario once per named input.
    pub fn with_inputs<N: Into<String>>(inputs: impl IntoIterator<Item = (N, I)>) -> Bench<I> {
        Bench::build(inputs.into_iter().map(|(name, value)| (Some(name.into()), value)).collect())
    }

    fn build(inputs: Vec<(Option<String>, I)>) -> Bench<I> {
        let names = inputs.iter().filter_map(|(name, _)| name.clone()).collect();
        Bench {
            config: Config {
                warmup_ns: 2_000_000_000,
                time_ns: 5_000_000_000,
                drain_ns: 1_000_000_000,
                extended_statistics: false,
                inputs: names,
            },
            inputs,
            scenarios: Vec::new(),
            print: true,
        }
    }

    /// Time each scenario runs before the measurement; its units are counted apart.
    pub fn warmup(mut self, warmup: Duration) -> Self {
        self.config.warmup_ns = warmup.as_nanos() as u64;
        self
    }

    /// Time each scenario is measured.
    pub fn time(mut self, time: Duration) -> Self {
        self.config.time_ns = time.as_nanos() as u64;
        self
    }

    /// The longest wait after the measurement for units started and not yet completed.
    pub fn drain(mut self, drain: Duration) -> Self {
        self.config.drain_ns = drain.as_nanos() as u64;
        self
    }

    /// Also print minimum, maximum, sample size and mode.
    pub fn extended_statistics(mut self, on: bool) -> Self {
        self.config.extended_statistics = on;
        self
    }

    /// Print nothing; `run` only returns the report.
    pub fn quiet(mut self) -> Self {
        self.print = false;
        self
    }

    /// Adds a scenario. Its body is called with a recorder and the input, again and again until
    /// the measurement ends; a body that runs longer can loop `while recorder.running()`.
    pub fn scenario(mut self, name: impl Into<String>, body: impl FnMut(&Recorder, &I) + 'static) -> Self {
        self.scenarios.push((name.into(), Box::new(body)));
        self
    }

    /// Runs every scenario with every input, prints the report (unless quiet) and returns it.
    pub fn run(mut self) -> Report {
        if self.print {
            eprintln!("{}", crate::console::preamble(&self.config, self.scenarios.len()));
        }
        let mut results = Vec::new();
        for (name, body) in self.scenarios.iter_mut() {
            for (input_name, input) in &self.inputs {
                if self.print {
                    eprintln!("{}", crate::console::progress(name, input_name.as_deref()));
                }
                results.push(run_job(&self.config, name, input_name.clone(), |rec| body(rec, input)));
            }
        }
        let report = Report {
            schema: SCHEMA,
            tool: format!("taskmeter-record {}", env!("CARGO_PKG_VERSION")),
            config: self.config,
            results,
            complete: true,
        };
        if self.print {
            print!("{}", crate::console::render(&report));
        }
        report
    }
}

fn run_job(config: &Config, name: &str, input: Option<String>, mut body: impl FnMut(&Recorder)) -> ScenarioResult {
    let start_ns = now_ns();
    let warmup_end_ns = start_ns + config.warmup_ns;
    let window = Window { start_ns, warmup_end_ns, end_ns: warmup_end_ns + config.time_ns };
    let job = Job::new(window);
    let recorder = Recorder::local(job.clone());
    let mut invocations = 0;
    while now_ns() < window.end_ns {
        body(&recorder);
        invocations += 1;
    }
    let drain_end = now_ns().max(window.end_ns) + config.drain_ns;
    while job.open_ids() > 0 && now_ns() < drain_end {
        std::thread::sleep(Duration::from_millis(1));
    }
    let collected = job.close();
    let analysis = analyze(collected.events, window, collected.warmup_units, collected.last_warmup_t);
    let mut result = result_of(name, input, window, invocations, &analysis);
    result.measured.outside.after_close_events = job.after_close();
    result
}

/// A result from an analysis; `error` and `delivery` are for the caller to fill.
pub fn result_of(name: &str, input: Option<String>, window: Window, invocations: u64, a: &Analysis) -> ScenarioResult {
    ScenarioResult {
        scenario: name.to_string(),
        input,
        error: None,
        window,
        invocations,
        measured: a.measured.clone(),
        delivery: None,
        notes: Vec::new(),
        histograms: None,
    }
}
