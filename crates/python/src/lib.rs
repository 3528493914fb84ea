//! The native module `artq._artq` of the `artq` Python package.
//!
//! Researchers who evaluate and train loss-recovery schemes work in Python;
//! this module gives them artq's simulator without a process per run. It
//! adds no second definition of anything: a run is described by the same
//! scenario keys as `artq sim --scenario FILE` ([`lab::Scenario`], read
//! here from JSON instead of TOML), and its result is the same JSON object
//! `artq sim --json` prints ([`lab::RunResult::to_json`]). Errors carry the
//! messages the command line prints.
//!
//! Long work (a run, an experiment) releases the GIL, so Python threads
//! (or Ray workers sharing a process) run simulations in parallel.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyMapping, PyTuple, PyType};

use lab::experiments::{self as exps, report, Scale, EXPERIMENTS};
use lab::Scenario;

/// The exception classes of the package, one hierarchy: `ArtqError` is the
/// base of every one, and each is also the built-in exception it stands
/// for (`ScenarioError` is a `ValueError`, `ScenarioFileNotFound` a
/// `FileNotFoundError`, ...), so `except artq.ArtqError` catches whatever
/// the package raises and `except ValueError` still works.
///
/// The classes have two bases, which `create_exception!` cannot make: they
/// are built once per interpreter with `type(name, bases, namespace)`
/// ([`error_types`]), in [`ERRORS`] order, each parent before its children.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Error {
    /// `ArtqError(Exception)`.
    Artq,
    /// `ArtqValueError(ArtqError, ValueError)`.
    Value,
    /// `ArtqTypeError(ArtqError, TypeError)`.
    Type,
    /// `ScenarioError(ArtqValueError)`.
    Scenario,
    /// `ScenarioFileNotFound(ArtqError, FileNotFoundError)`.
    ScenarioFileNotFound,
    /// `ExperimentError(ArtqValueError)`.
    Experiment,
    /// `GridError(ArtqValueError)`.
    Grid,
    /// `EnvError(ArtqValueError)`.
    Env,
    /// `RunError(ArtqError, RuntimeError)`.
    Run,
    /// `OutputError(ArtqError, OSError)`.
    Output,
    /// `MissingExtraError(ArtqError, ImportError)`.
    MissingExtra,
}

/// One exception class: its name, its parent among [`ERRORS`] (`None`:
/// `Exception`), the built-in it also derives from, and its docstring.
struct ErrorClass {
    kind: Error,
    name: &'static str,
    parent: Option<Error>,
    builtin: Option<&'static str>,
    doc: &'static str,
}

/// Every exception class of the package, parents first; `Error as usize`
/// is the index.
const ERRORS: [ErrorClass; 11] = [
    ErrorClass {
        kind: Error::Artq,
        name: "ArtqError",
        parent: None,
        builtin: None,
        doc: "The base of every exception artq raises.\n\
              \n\
              ``except artq.ArtqError`` catches them all. Each subclass is also the\n\
              built-in exception it stands for (``ScenarioError`` is a ``ValueError``,\n\
              ...). Raised as itself only for an internal failure that is never\n\
              expected (a result that cannot be encoded).",
    },
    ErrorClass {
        kind: Error::Value,
        name: "ArtqValueError",
        parent: Some(Error::Artq),
        builtin: Some("ValueError"),
        doc: "A bad argument value; also a ``ValueError``.\n\
              \n\
              The base of ``ScenarioError``, ``ExperimentError``, ``GridError`` and\n\
              ``EnvError``; raised as itself for other arguments (``jobs=0``).",
    },
    ErrorClass {
        kind: Error::Type,
        name: "ArtqTypeError",
        parent: Some(Error::Artq),
        builtin: Some("TypeError"),
        doc: "An argument of the wrong type; also a ``TypeError``.\n\
              \n\
              A scenario that is not a dict, experiment names that are not strings,\n\
              an unknown keyword argument.",
    },
    ErrorClass {
        kind: Error::Scenario,
        name: "ScenarioError",
        parent: Some(Error::Value),
        builtin: None,
        doc: "A scenario that cannot run; also a ``ValueError``.\n\
              \n\
              An unknown key, a bad value, an unknown scheme, a malformed trace file.\n\
              The message is the command line's.",
    },
    ErrorClass {
        kind: Error::ScenarioFileNotFound,
        name: "ScenarioFileNotFound",
        parent: Some(Error::Artq),
        builtin: Some("FileNotFoundError"),
        doc: "A file a scenario names does not exist; also a ``FileNotFoundError``.\n\
              \n\
              A trace, a loss pattern. The message is the command line's and names\n\
              the file.",
    },
    ErrorClass {
        kind: Error::Experiment,
        name: "ExperimentError",
        parent: Some(Error::Value),
        builtin: None,
        doc: "An unknown experiment, or one that is not a grid; also a ``ValueError``.\n\
              \n\
              An unknown name given to ``reproduce`` (the message lists the known\n\
              ones), or an experiment whose runs are not a grid (``experiment_grid``).",
    },
    ErrorClass {
        kind: Error::Grid,
        name: "GridError",
        parent: Some(Error::Value),
        builtin: None,
        doc: "A malformed sweep grid or run rows; also a ``ValueError``.\n\
              \n\
              An unknown grid key, a scenario that is not a dict, no seeds; rows given\n\
              to ``write_csvs`` that are not ``run_case`` rows.",
    },
    ErrorClass {
        kind: Error::Env,
        name: "EnvError",
        parent: Some(Error::Value),
        builtin: None,
        doc: "An environment that cannot be built or stepped as asked; also a ``ValueError``.\n\
              \n\
              An unknown decision or reward preset, a bad ``r_max``, an action out of\n\
              range, a seed whose run has no decision.",
    },
    ErrorClass {
        kind: Error::Run,
        name: "RunError",
        parent: Some(Error::Artq),
        builtin: Some("RuntimeError"),
        doc:
            "A run that could not complete, or was driven out of order; also a ``RuntimeError``.\n\
              \n\
              The scenario's time limit reached, the connection given up, a setup\n\
              failure (the message is the command line's); ``step`` before ``reset``\n\
              or after the episode ended.",
    },
    ErrorClass {
        kind: Error::Output,
        name: "OutputError",
        parent: Some(Error::Artq),
        builtin: Some("OSError"),
        doc: "Results that cannot be written; also an ``OSError``.\n\
              \n\
              The output directory cannot be created, or a file in it cannot be\n\
              written.",
    },
    ErrorClass {
        kind: Error::MissingExtra,
        name: "MissingExtraError",
        parent: Some(Error::Artq),
        builtin: Some("ImportError"),
        doc: "An optional dependency is missing; also an ``ImportError``.\n\
              \n\
              The message names the extra that installs it: ``pip install\n\
              'artq[env]'``.",
    },
];

static ERROR_TYPES: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

/// The exception classes of [`ERRORS`], built on first use.
fn error_types(py: Python<'_>) -> PyResult<&Vec<Py<PyType>>> {
    ERROR_TYPES.get_or_try_init(py, || {
        let builtins = py.import("builtins")?;
        let make = builtins.getattr("type")?;
        let mut types: Vec<Py<PyType>> = Vec::with_capacity(ERRORS.len());
        for (i, class) in ERRORS.iter().enumerate() {
            debug_assert_eq!(class.kind as usize, i);
            let mut bases = Vec::new();
            match class.parent {
                Some(p) => bases.push(
                    types
                        .get(p as usize)
                        .ok_or_else(|| {
                            pyo3::exceptions::PyRuntimeError::new_err(format!(
                                "{}: parent class defined after it",
                                class.name
                            ))
                        })?
                        .bind(py)
                        .clone()
                        .into_any(),
                ),
                None => bases.push(builtins.getattr("Exception")?),
            }
            if let Some(b) = class.builtin {
                bases.push(builtins.getattr(b)?);
            }
            let namespace = PyDict::new(py);
            namespace.set_item("__doc__", class.doc)?;
            // The package re-exports every class: `artq.ScenarioError` is
            // what pickle (Ray) and tracebacks name.
            namespace.set_item("__module__", "artq")?;
            let t = make.call1((class.name, PyTuple::new(py, bases)?, namespace))?;
            types.push(t.downcast_into::<PyType>()?.unbind());
        }
        Ok(types)
    })
}

impl Error {
    /// This exception with `message`.
    pub(crate) fn new_err(self, message: impl Into<String>) -> PyErr {
        let message = message.into();
        Python::attach(|py| match error_types(py) {
            Ok(types) => match types.get(self as usize) {
                Some(t) => PyErr::from_type(t.bind(py).clone(), message),
                None => pyo3::exceptions::PyRuntimeError::new_err(message),
            },
            Err(e) => e,
        })
    }
}

/// The Python exception for a scenario that cannot run: a missing file is
/// a `ScenarioFileNotFound` (a `FileNotFoundError`), a run that started
/// but could not complete (setup, corruption, incomplete) a `RunError` (a
/// `RuntimeError`), anything else a `ScenarioError` (a `ValueError`); the
/// message is the command line's.
pub(crate) fn scenario_error(e: &lab::ScenarioError) -> PyErr {
    let missing = match e {
        lab::ScenarioError::Io { error, .. } => error.kind() == std::io::ErrorKind::NotFound,
        lab::ScenarioError::Trace(netem::TraceError::Io { error, .. }) => {
            error.kind() == std::io::ErrorKind::NotFound
        }
        _ => false,
    };
    let kind = match e {
        _ if missing => Error::ScenarioFileNotFound,
        lab::ScenarioError::Setup(_)
        | lab::ScenarioError::Data(_)
        | lab::ScenarioError::Incomplete { .. } => Error::Run,
        _ => Error::Scenario,
    };
    kind.new_err(e.to_string())
}

/// The scenario of `scenario` (a dict of scenario keys) updated by the
/// keyword `options`, parsed by the same serde definition as the TOML
/// scenario files.
fn scenario_from(
    py: Python<'_>,
    scenario: Option<&Bound<'_, PyAny>>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Scenario> {
    let merged = PyDict::new(py);
    if let Some(s) = scenario.filter(|s| !s.is_none()) {
        let mapping = s.downcast::<PyMapping>().map_err(|_| {
            Error::Type.new_err(format!(
                "a scenario is a dict of scenario keys, not {}",
                type_name(s)
            ))
        })?;
        merged.update(mapping)?;
    }
    if let Some(o) = options {
        // A keyword that names a link key (`loss=0.02`) sets that key of
        // `link`, as `artq sim --loss` does; the link keys are those of
        // the scenario definition itself.
        let link_keys = match serde_json::to_value(Scenario::default()) {
            Ok(serde_json::Value::Object(mut d)) => match d.remove("link") {
                Some(serde_json::Value::Object(l)) => l.into_iter().map(|(k, _)| k).collect(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        for (k, v) in o.iter() {
            let key: String = k.extract()?;
            // (No link key is also a scenario key.)
            if link_keys.contains(&key) {
                let link = match merged.get_item("link")? {
                    Some(l) => {
                        let copy = PyDict::new(py);
                        let table = l.downcast::<PyMapping>().map_err(|_| {
                            Error::Scenario.new_err(format!(
                                "invalid scenario: link is a table of link keys, not {}",
                                type_name(&l)
                            ))
                        })?;
                        copy.update(table)?;
                        copy
                    }
                    None => PyDict::new(py),
                };
                link.set_item(&key, v)?;
                merged.set_item("link", link)?;
            } else {
                merged.set_item(k, v)?;
            }
        }
    }
    let json: String = py
        .import("json")?
        .call_method1("dumps", (merged,))
        .map_err(|e| Error::Scenario.new_err(format!("scenario is not plain data: {e}")))?
        .extract()?;
    serde_json::from_str::<Scenario>(&json).map_err(|e| {
        // serde's message without serde_json's "at line 1 column N", which
        // points into JSON the caller never wrote.
        let message = e.to_string();
        let message = message
            .rsplit_once(" at line ")
            .map_or(message.as_str(), |(m, _)| m);
        Error::Scenario.new_err(format!("invalid scenario: {message}"))
    })
}

/// The type name of `obj`, for messages.
fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "that".to_string(), |n| n.to_string())
}

fn json_to_python(py: Python<'_>, json: &str) -> PyResult<Py<PyAny>> {
    Ok(py.import("json")?.call_method1("loads", (json,))?.unbind())
}

/// Run one simulation and return its result as a dict.
///
/// Parameters
/// ----------
/// scenario : dict, optional
///     Scenario keys, those of ``artq sim --scenario FILE`` (docs/sim.md),
///     e.g. ``{"scheme": "art", "workload": {"size": "2MB"}, "link":
///     {"loss": 0.05}}``.
/// **options
///     Scenario keys that add to or override ``scenario``; a link key
///     (``loss=0.02``) sets that key of ``link``, as ``artq sim --loss``
///     does.
///
/// Returns
/// -------
/// dict
///     The object ``artq sim --json`` prints (``artq.results.SimResult``).
///
/// Raises
/// ------
/// ScenarioError
///     A scenario that cannot run: an unknown key (the message lists the
///     known ones), a bad value, an unknown scheme.
/// ScenarioFileNotFound
///     A trace or loss-pattern file the scenario names does not exist.
/// RunError
///     The run could not complete (its time limit reached, the connection
///     given up).
/// ArtqTypeError
///     A scenario that is not a dict.
///
/// Examples
/// --------
/// >>> r = artq.sim(scheme="art", seed=3, workload={"size": "300KB"}, loss=0.05)
/// >>> r["n_max"] >= 1
/// True
#[pyfunction]
#[pyo3(signature = (scenario=None, **options))]
fn sim(
    py: Python<'_>,
    scenario: Option<&Bound<'_, PyAny>>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyAny>> {
    let scenario = scenario_from(py, scenario, options)?;
    let result = py
        .detach(|| lab::run(&scenario))
        .map_err(|e| scenario_error(&e))?;
    json_to_python(py, &result.to_json())
}

/// The scenario keys' defaults, as a dict.
///
/// Returns
/// -------
/// dict
///     The scenario ``sim()`` runs with no arguments: every key a scenario
///     may set, with its default.
#[pyfunction]
fn default_scenario(py: Python<'_>) -> PyResult<Py<PyAny>> {
    let json = serde_json::to_string(&Scenario::default())
        .map_err(|e| Error::Artq.new_err(e.to_string()))?;
    json_to_python(py, &json)
}

/// The recovery schemes, as (name, description) pairs.
///
/// Returns
/// -------
/// list of tuple of (str, str)
///     Every scheme a scenario's ``scheme`` may name; a name with ``:X``
///     takes a parameter (``fixed:R`` is used as ``fixed:3``).
#[pyfunction]
fn schemes() -> Vec<(&'static str, &'static str)> {
    recovery::SCHEMES.iter().map(|r| (r.name, r.help)).collect()
}

/// The experiments of ``reproduce``, as (name, title) pairs.
///
/// Returns
/// -------
/// list of tuple of (str, str)
///     The names ``reproduce`` and ``experiment_grid`` take.
#[pyfunction]
fn experiments() -> Vec<(&'static str, &'static str)> {
    EXPERIMENTS
        .iter()
        .filter_map(|n| exps::experiment(n, Scale::Tiny).map(|e| (e.name, e.title)))
        .collect()
}

/// The scale `artq reproduce` runs at: `--tiny` (the test suite's), else
/// `--quick`, else the paper's.
fn scale_of(quick: bool, tiny: bool) -> Scale {
    if tiny {
        Scale::Tiny
    } else if quick {
        Scale::Quick
    } else {
        Scale::Full
    }
}

/// Regenerate the papers' evaluations, as ``artq reproduce`` does.
///
/// The engine of ``artq.reproduce``, which validates the arguments and
/// shows the progress through ``on_run``.
///
/// Parameters
/// ----------
/// names : list of str or None
///     The experiments; None: every one, an empty list: none.
/// quick : bool
///     Quick scale; False: the paper's.
/// out : str
///     The directory the CSVs, charts, ``report.md`` and ``report.html`` go to.
/// jobs : int or None
///     Runs at once (at least 1); None: the cores.
/// tiny : bool
///     The test suite's scale (``--tiny``), before ``quick``.
/// on_run : callable or None
///     Called after each run as ``on_run(experiment, done, total, group,
///     scheme, seed, error)`` (``error`` None for a run that completed).
///     Its first exception stops the calls and is raised once the work ends.
///
/// Returns
/// -------
/// list of str
///     The paths written.
///
/// Raises
/// ------
/// ExperimentError
///     An unknown experiment name (the message lists the known ones).
/// ArtqValueError
///     ``jobs`` below 1.
/// OutputError
///     The results cannot be written under ``out``.
#[pyfunction]
#[pyo3(signature = (names=None, quick=true, out="artq-out", jobs=None, tiny=false, on_run=None))]
fn reproduce(
    py: Python<'_>,
    names: Option<Vec<String>>,
    quick: bool,
    out: &str,
    jobs: Option<i64>,
    tiny: bool,
    on_run: Option<Py<PyAny>>,
) -> PyResult<Py<PyAny>> {
    let scale = scale_of(quick, tiny);
    // None: every experiment; an empty list: none (`select` reads an empty
    // list as "all", as the command line does).
    let chosen = match names {
        Some(names) if names.is_empty() => Vec::new(),
        names => exps::select(&names.unwrap_or_default(), scale)
            .map_err(|e| Error::Experiment.new_err(e))?,
    };
    let jobs = match jobs {
        None => std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
        Some(j) => usize::try_from(j)
            .ok()
            .filter(|j| *j >= 1)
            .ok_or_else(|| Error::Value.new_err(format!("jobs {j} must be at least 1")))?,
    };
    let out = PathBuf::from(out);
    let mut failed: Option<PyErr> = None;
    let written = py.detach(|| {
        // Every experiment's runs from one queue (exps::run_experiments).
        let mut on_done = |d: &exps::RunDone<'_>| {
            let Some(callback) = on_run.as_ref().filter(|_| failed.is_none()) else {
                return;
            };
            let called = Python::attach(|py| {
                callback
                    .call1(
                        py,
                        (
                            d.experiment,
                            d.done,
                            d.total,
                            d.row.group.as_str(),
                            d.row.scheme.as_str(),
                            d.row.seed,
                            d.row.error.as_deref(),
                        ),
                    )
                    .map(drop)
            });
            if let Err(e) = called {
                failed = Some(e);
            }
        };
        let results = exps::evaluate_all(&chosen, jobs, &mut on_done);
        report::write_outputs(&out, scale, &chosen, &results)
            .map_err(|e| format!("cannot write the results into {}: {e}", out.display()))
    });
    if let Some(e) = failed {
        return Err(e);
    }
    let written = written.map_err(|e| Error::Output.new_err(e))?;
    let paths: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    Ok(PyList::new(py, paths)?.into_any().unbind())
}

/// One simulated run paused at every decision of one kind.
///
/// The engine of ``artq.env.RetransmissionEnv`` (see `lab::steer`). Not
/// thread-safe: one Python thread drives it.
#[pyclass(unsendable, module = "artq._artq")]
struct SteeredRun {
    run: lab::steer::SteeredRun,
    actions: u32,
    observation_len: usize,
}

fn step_tuple(py: Python<'_>, step: lab::steer::Step) -> PyResult<Py<PyAny>> {
    let obs = match step.observation {
        Some(o) => PyList::new(py, o)?.into_any().unbind(),
        None => py.None(),
    };
    Ok((obs, step.reward, step.terminated, step.truncated)
        .into_pyobject(py)?
        .into_any()
        .unbind())
}

#[pymethods]
impl SteeredRun {
    /// Start a run steered at one kind of decision.
    ///
    /// The run of `scenario` (a dict of scenario keys; its scheme is
    /// replaced) steering `decision` (`art`, `rcp[:OPTIONS]` or `autorec`)
    /// with the reward preset `reward` (None: the decision's paper's);
    /// returns the run and the first step `(observation, reward,
    /// terminated, truncated)`. Raises `EnvError` for an unknown decision
    /// or reward, as `sim()` does for a bad scenario.
    #[staticmethod]
    #[pyo3(signature = (scenario, decision="art", reward=None, r_max=8))]
    fn start(
        py: Python<'_>,
        scenario: Option<&Bound<'_, PyAny>>,
        decision: &str,
        reward: Option<&str>,
        r_max: u32,
    ) -> PyResult<(SteeredRun, Py<PyAny>)> {
        let scenario = scenario_from(py, scenario, None)?;
        let kind =
            lab::steer::steer_kind(decision, reward, r_max).map_err(|e| Error::Env.new_err(e))?;
        let actions = kind.actions();
        let observation_len = kind.observation_len();
        let (run, first) =
            lab::steer::SteeredRun::start(&scenario, kind).map_err(|e| scenario_error(&e))?;
        let first = step_tuple(py, first)?;
        Ok((
            SteeredRun {
                run,
                actions,
                observation_len,
            },
            first,
        ))
    }

    /// Answer the waiting decision and run to the next.
    ///
    /// Returns `(observation or None, reward, terminated, truncated)`.
    /// Raises `EnvError` for an action out of range, `RunError` when no
    /// decision waits (the run ended).
    fn act(&mut self, py: Python<'_>, action: u64) -> PyResult<Py<PyAny>> {
        if action >= u64::from(self.actions) {
            return Err(Error::Env.new_err(format!(
                "action {action} is out of range: 0..{}",
                self.actions
            )));
        }
        // In range, so the one error left: no decision waits (the run ended).
        let action = u32::try_from(action).map_err(|e| Error::Env.new_err(e.to_string()))?;
        let step = self.run.act(action).map_err(|e| Error::Run.new_err(e))?;
        step_tuple(py, step)
    }

    /// The number of actions.
    #[getter]
    fn actions(&self) -> u32 {
        self.actions
    }

    /// The length of an observation.
    #[getter]
    fn observation_len(&self) -> usize {
        self.observation_len
    }

    /// Decisions answered so far.
    #[getter]
    fn decisions(&self) -> u64 {
        self.run.decisions
    }

    /// The `artq sim --json` dict of the run once it ended, else None.
    fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match self.run.result() {
            None => Ok(py.None()),
            Some(Ok(r)) => json_to_python(py, &r.to_json()),
            // The scenario was checked when the run started: what fails now is
            // the run (a time limit, an idle timeout), a `RunError`.
            Some(Err(e)) => Err(Error::Run.new_err(e.to_string())),
        }
    }
}

/// The runs of an experiment of ``reproduce`` at a scale.
///
/// The experiment ``name`` at the scale of ``reproduce(quick=, tiny=)``:
/// a dict with ``name``, ``seeds`` (each case runs with each) and
/// ``cases``, a list of dicts ``group``, ``scheme`` (the label of the
/// CSVs) and ``scenario`` (its scenario keys, as ``sim()`` takes them; the
/// seed is replaced per run) (``artq.results.ExperimentCases``). What
/// ``artq.experiment_grid`` builds a sweep from. Raises
/// ``ExperimentError`` for an unknown experiment.
#[pyfunction]
#[pyo3(signature = (name, quick=true, tiny=false))]
fn experiment_cases(py: Python<'_>, name: &str, quick: bool, tiny: bool) -> PyResult<Py<PyAny>> {
    let scale = scale_of(quick, tiny);
    let exp = exps::select(&[name.to_string()], scale)
        .map_err(|e| Error::Experiment.new_err(e))?
        .into_iter()
        .next()
        .ok_or_else(|| Error::Experiment.new_err(format!("unknown experiment '{name}'")))?;
    let cases: Vec<serde_json::Value> = exp
        .cases
        .iter()
        .map(|c| {
            Ok(serde_json::json!({
                "group": c.group,
                "scheme": c.scheme,
                "scenario": serde_json::to_value(&c.scenario)?,
            }))
        })
        .collect::<Result<_, serde_json::Error>>()
        .map_err(|e| Error::Artq.new_err(e.to_string()))?;
    let json = serde_json::json!({ "name": exp.name, "seeds": exp.seeds, "cases": cases });
    json_to_python(py, &json.to_string())
}

/// The decisions the environment can steer, as (name, description).
///
/// Returns
/// -------
/// list of tuple of (str, str)
///     What ``RetransmissionEnv(decision=...)`` takes.
#[pyfunction]
fn decisions() -> Vec<(&'static str, &'static str)> {
    lab::steer::DECISIONS.to_vec()
}

/// The reward presets, as (name, description).
///
/// Returns
/// -------
/// list of tuple of (str, str)
///     What ``RetransmissionEnv(reward=...)`` takes.
#[pyfunction]
fn rewards() -> Vec<(&'static str, &'static str)> {
    lab::steer::REWARDS.to_vec()
}

/// Check a scenario without running it.
///
/// Raises what `sim()` would for a scenario (a dict of scenario keys, and
/// keyword arguments as `sim()` takes them) that cannot be built: an
/// unknown key, a bad value, a missing trace file.
#[pyfunction]
#[pyo3(signature = (scenario=None, **options))]
fn validate(
    py: Python<'_>,
    scenario: Option<&Bound<'_, PyAny>>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<()> {
    let scenario = scenario_from(py, scenario, options)?;
    scenario.validate().map_err(|e| scenario_error(&e))?;
    scenario
        .link
        .configs()
        .map_err(|e| scenario_error(&lab::ScenarioError::from(e)))?;
    recovery::parse_scheme(&scenario.scheme)
        .map_err(|e| scenario_error(&lab::ScenarioError::Scheme(e.to_string())))?;
    Ok(())
}

/// The columns of a run's row, in ``artq reproduce``'s order.
///
/// The columns of `NAME_runs.csv` after `experiment`: `group, scheme,
/// seed, error`, then every metric.
#[pyfunction]
fn run_columns() -> Vec<&'static str> {
    ["group", "scheme", "seed", "error"]
        .into_iter()
        .chain(exps::METRICS.iter().map(|(m, _)| *m))
        .collect()
}

/// Run a scenario as one case of an experiment.
///
/// Runs `scenario` (a dict of scenario keys) with `seed` as one case of an
/// experiment (`group`, `scheme` label), as `artq reproduce` runs its
/// cases. Returns a dict: `group`, `scheme`, `seed`, `error` (None when it
/// completed), `metrics` (the row of `NAME_runs.csv`, by metric) and `sim`
/// (the `artq sim --json` object; None on failure). Releases the GIL. A
/// scenario that cannot even be built raises, as `sim()` does.
#[pyfunction]
#[pyo3(signature = (scenario, group, scheme, seed))]
fn run_case(
    py: Python<'_>,
    scenario: Option<&Bound<'_, PyAny>>,
    group: String,
    scheme: String,
    seed: u64,
) -> PyResult<Py<PyAny>> {
    let scenario = scenario_from(py, scenario, None)?;
    scenario.validate().map_err(|e| scenario_error(&e))?;
    let case = exps::Case {
        group,
        scheme,
        scenario: Scenario { seed, ..scenario },
    };
    let (row, sim) = py.detach(|| match lab::run(&case.scenario) {
        Ok(r) => (
            exps::RunRow::from_result(&case, seed, &r),
            Some(r.to_json()),
        ),
        Err(e) => (
            exps::RunRow {
                group: case.group.clone(),
                scheme: case.scheme.clone(),
                seed,
                error: Some(e.to_string()),
                metrics: Default::default(),
            },
            None,
        ),
    });
    let row_json = serde_json::to_string(&row).map_err(|e| Error::Artq.new_err(e.to_string()))?;
    let out = json_to_python(py, &row_json)?;
    let dict = out
        .bind(py)
        .downcast::<PyDict>()
        .map_err(|e| Error::Artq.new_err(e.to_string()))?;
    dict.set_item("error", row.error.as_deref())?;
    match sim {
        Some(json) => dict.set_item("sim", json_to_python(py, &json)?)?,
        None => dict.set_item("sim", py.None())?,
    }
    Ok(out)
}

/// The CSV texts of ``artq reproduce`` for runs of ``run_case``.
///
/// The `NAME_runs.csv` and `NAME_summary.csv` texts of `artq reproduce`
/// for `runs` (row dicts as `run_case` returns them) of experiment `name`:
/// the same writers, so the same columns and number formats. Summary rows
/// follow the (group, scheme) pairs in order of first appearance.
#[pyfunction]
fn experiment_csvs(
    py: Python<'_>,
    name: String,
    runs: &Bound<'_, PyList>,
) -> PyResult<(String, String)> {
    let json: String = py
        .import("json")?
        .call_method1("dumps", (runs,))
        .map_err(|e| Error::Grid.new_err(format!("not rows of run_case: {e}")))?
        .extract()?;
    let runs: Vec<exps::RunRow> = serde_json::from_str(&json)
        .map_err(|e| Error::Grid.new_err(format!("not rows of run_case: {e}")))?;
    let mut cases: Vec<exps::Case> = Vec::new();
    for r in &runs {
        if !cases
            .iter()
            .any(|c| c.group == r.group && c.scheme == r.scheme)
        {
            cases.push(exps::Case {
                group: r.group.clone(),
                scheme: r.scheme.clone(),
                scenario: Scenario::default(),
            });
        }
    }
    let rows = exps::aggregate(&cases, &runs);
    let result = exps::ExperimentResult {
        name,
        title: String::new(),
        setting: String::new(),
        seeds: Vec::new(),
        runs,
        rows,
        claims: Vec::new(),
        asides: Vec::new(),
    };
    Ok((report::runs_csv(&result), report::summary_csv(&result)))
}

/// The module `artq._artq`; the package `artq` re-exports it.
#[pymodule]
fn _artq(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sim, m)?)?;
    m.add_function(wrap_pyfunction!(default_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(schemes, m)?)?;
    m.add_function(wrap_pyfunction!(experiments, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce, m)?)?;
    m.add_function(wrap_pyfunction!(decisions, m)?)?;
    m.add_function(wrap_pyfunction!(run_columns, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(run_case, m)?)?;
    m.add_function(wrap_pyfunction!(experiment_csvs, m)?)?;
    m.add_function(wrap_pyfunction!(experiment_cases, m)?)?;
    m.add_function(wrap_pyfunction!(rewards, m)?)?;
    m.add_class::<SteeredRun>()?;
    for (class, t) in ERRORS.iter().zip(error_types(m.py())?) {
        m.add(class.name, t.bind(m.py()))?;
    }
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
