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

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyFileNotFoundError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use lab::experiments::{self as exps, report, Scale, EXPERIMENTS};
use lab::Scenario;

create_exception!(
    _artq,
    ArtqError,
    PyException,
    "An error of artq itself, not of its input: results that cannot be written."
);
create_exception!(
    _artq,
    ScenarioError,
    PyValueError,
    "A scenario that cannot run: an unknown key, a bad value, an unknown scheme (a ValueError)."
);
create_exception!(
    _artq,
    ScenarioFileNotFound,
    PyFileNotFoundError,
    "A file a scenario names (a trace, a loss pattern) does not exist (a FileNotFoundError)."
);

/// The Python exception for a scenario that cannot run: a missing file is
/// a `FileNotFoundError` (`ScenarioFileNotFound`), anything else a
/// `ValueError` (`ScenarioError`); the message is the command line's.
pub(crate) fn scenario_error(e: &lab::ScenarioError) -> PyErr {
    let missing = match e {
        lab::ScenarioError::Io { error, .. } => error.kind() == std::io::ErrorKind::NotFound,
        lab::ScenarioError::Trace(netem::TraceError::Io { error, .. }) => {
            error.kind() == std::io::ErrorKind::NotFound
        }
        _ => false,
    };
    if missing {
        ScenarioFileNotFound::new_err(e.to_string())
    } else {
        ScenarioError::new_err(e.to_string())
    }
}

/// The scenario of `scenario` (a dict of scenario keys) updated by the
/// keyword `options`, parsed by the same serde definition as the TOML
/// scenario files.
fn scenario_from(
    py: Python<'_>,
    scenario: Option<&Bound<'_, PyDict>>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Scenario> {
    let merged = PyDict::new(py);
    if let Some(s) = scenario {
        merged.update(s.as_mapping())?;
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
                        copy.update(l.downcast::<PyDict>()?.as_mapping())?;
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
        .map_err(|e| ScenarioError::new_err(format!("scenario is not plain data: {e}")))?
        .extract()?;
    serde_json::from_str::<Scenario>(&json).map_err(|e| {
        // serde's message without serde_json's "at line 1 column N", which
        // points into JSON the caller never wrote.
        let message = e.to_string();
        let message = message
            .rsplit_once(" at line ")
            .map_or(message.as_str(), |(m, _)| m);
        ScenarioError::new_err(format!("invalid scenario: {message}"))
    })
}

fn json_to_python(py: Python<'_>, json: &str) -> PyResult<Py<PyAny>> {
    Ok(py.import("json")?.call_method1("loads", (json,))?.unbind())
}

/// Run one simulation and return its result as a dict.
///
/// `scenario` is a dict of scenario keys (those of `artq sim --scenario
/// FILE`, e.g. ``{"scheme": "art", "workload": {"size": "2MB"}, "link":
/// {"loss": 0.05}}``); keyword arguments add to or override it
/// (``artq.sim(scheme="art", seed=3)``). The result has the fields of `artq
/// sim --json`. Raises `ScenarioError` for a scenario that cannot run.
#[pyfunction]
#[pyo3(signature = (scenario=None, **options))]
fn sim(
    py: Python<'_>,
    scenario: Option<&Bound<'_, PyDict>>,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyAny>> {
    let scenario = scenario_from(py, scenario, options)?;
    let result = py
        .detach(|| lab::run(&scenario))
        .map_err(|e| scenario_error(&e))?;
    json_to_python(py, &result.to_json())
}

/// The scenario keys' defaults: the scenario `sim()` runs with no
/// arguments, as a dict (the keys a scenario may set).
#[pyfunction]
fn default_scenario(py: Python<'_>) -> PyResult<Py<PyAny>> {
    let json = serde_json::to_string(&Scenario::default())
        .map_err(|e| ArtqError::new_err(e.to_string()))?;
    json_to_python(py, &json)
}

/// The recovery schemes, as (name, description) pairs; a name with `:X`
/// takes a parameter (`fixed:3`).
#[pyfunction]
fn schemes() -> Vec<(&'static str, &'static str)> {
    recovery::SCHEMES.iter().map(|r| (r.name, r.help)).collect()
}

/// The experiments of `reproduce`, as (name, title) pairs.
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

/// Regenerate the papers' evaluations, as `artq reproduce` does: `names`
/// (all when None) at quick scale (or the paper's with `quick=False`, or
/// the test suite's tiny one with `tiny=True`, as `--tiny`), written to
/// `out` (CSV, charts, `report.md`). Returns the paths written. Progress
/// goes to stderr unless `progress=False`.
#[pyfunction]
#[pyo3(signature = (names=None, quick=true, out="artq-out".to_string(), jobs=None, progress=true, tiny=false))]
fn reproduce(
    py: Python<'_>,
    names: Option<Vec<String>>,
    quick: bool,
    out: String,
    jobs: Option<usize>,
    progress: bool,
    tiny: bool,
) -> PyResult<Py<PyAny>> {
    let scale = scale_of(quick, tiny);
    // None: every experiment; an empty list: none (`select` reads an empty
    // list as "all", as the command line does).
    let chosen = match names {
        Some(names) if names.is_empty() => Vec::new(),
        names => exps::select(&names.unwrap_or_default(), scale).map_err(PyValueError::new_err)?,
    };
    let jobs = jobs.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let out = PathBuf::from(out);
    let written = py.detach(|| {
        let mut results = Vec::new();
        for exp in &chosen {
            let name = exp.name;
            let mut on_done = |d: &exps::RunDone<'_>| {
                if progress {
                    eprintln!(
                        "[{name}] {}/{} {} {} seed {}{}",
                        d.done,
                        d.total,
                        d.row.group,
                        d.row.scheme,
                        d.row.seed,
                        d.row
                            .error
                            .as_ref()
                            .map(|e| format!(": FAILED: {e}"))
                            .unwrap_or_default()
                    );
                }
            };
            results.push(exps::evaluate(exp, jobs, &mut on_done));
        }
        report::write_outputs(&out, scale, &chosen, &results)
            .map_err(|e| format!("cannot write the results into {}: {e}", out.display()))
    });
    let written = written.map_err(ArtqError::new_err)?;
    let paths: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
    Ok(PyList::new(py, paths)?.into_any().unbind())
}

/// One simulated run paused at every decision of one kind: the engine of
/// `artq.env.RetransmissionEnv` (see `lab::steer`). Not thread-safe: one
/// Python thread drives it.
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
    /// Start the run of `scenario` (a dict of scenario keys; its scheme is
    /// replaced) steering `decision` (`art`, `rcp[:OPTIONS]` or `autorec`) with the
    /// reward preset `reward` (None: the decision's paper's); returns the
    /// run and the first step `(observation, reward, terminated,
    /// truncated)`.
    #[staticmethod]
    #[pyo3(signature = (scenario, decision="art", reward=None, r_max=8))]
    fn start(
        py: Python<'_>,
        scenario: Option<&Bound<'_, PyDict>>,
        decision: &str,
        reward: Option<&str>,
        r_max: u32,
    ) -> PyResult<(SteeredRun, Py<PyAny>)> {
        let scenario = scenario_from(py, scenario, None)?;
        let kind =
            lab::steer::steer_kind(decision, reward, r_max).map_err(PyValueError::new_err)?;
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

    /// Answer the waiting decision and run to the next: `(observation or
    /// None, reward, terminated, truncated)`.
    fn act(&mut self, py: Python<'_>, action: u32) -> PyResult<Py<PyAny>> {
        let step = self.run.act(action).map_err(PyValueError::new_err)?;
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
            Some(Err(e)) => Err(scenario_error(&e)),
        }
    }
}

/// The runs of experiment `name` at the scale of `reproduce(quick=,
/// tiny=)`: a dict with `name`, `seeds` (each case runs with each) and
/// `cases`, a list of dicts `group`, `scheme` (the label of the CSVs) and
/// `scenario` (its scenario keys, as `sim()` takes them; the seed is
/// replaced per run). What `artq.experiment_grid` builds a sweep from.
#[pyfunction]
#[pyo3(signature = (name, quick=true, tiny=false))]
fn experiment_cases(py: Python<'_>, name: &str, quick: bool, tiny: bool) -> PyResult<Py<PyAny>> {
    let scale = scale_of(quick, tiny);
    let exp = exps::select(&[name.to_string()], scale)
        .map_err(PyValueError::new_err)?
        .into_iter()
        .next()
        .ok_or_else(|| PyValueError::new_err(format!("unknown experiment '{name}'")))?;
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
        .map_err(|e| ArtqError::new_err(e.to_string()))?;
    let json = serde_json::json!({ "name": exp.name, "seeds": exp.seeds, "cases": cases });
    json_to_python(py, &json.to_string())
}

/// The decisions the environment can steer, as (name, description).
#[pyfunction]
fn decisions() -> Vec<(&'static str, &'static str)> {
    lab::steer::DECISIONS.to_vec()
}

/// The reward presets, as (name, description).
#[pyfunction]
fn rewards() -> Vec<(&'static str, &'static str)> {
    lab::steer::REWARDS.to_vec()
}

/// Check `scenario` (a dict of scenario keys) without running it: raises
/// what `sim()` would for a scenario that cannot be built (an unknown key,
/// a bad value, a missing trace file).
#[pyfunction]
#[pyo3(signature = (scenario=None, **options))]
fn validate(
    py: Python<'_>,
    scenario: Option<&Bound<'_, PyDict>>,
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

/// The columns of a run's row, in `artq reproduce`'s `NAME_runs.csv`
/// order: `group, scheme, seed, error`, then every metric.
#[pyfunction]
fn run_columns() -> Vec<&'static str> {
    ["group", "scheme", "seed", "error"]
        .into_iter()
        .chain(exps::METRICS.iter().map(|(m, _)| *m))
        .collect()
}

/// Run `scenario` (a dict of scenario keys) with `seed` as one case of an
/// experiment (`group`, `scheme` label), as `artq reproduce` runs its
/// cases. Returns a dict: `group`, `scheme`, `seed`, `error` (None when it
/// completed), `metrics` (the row of `NAME_runs.csv`, by metric) and `sim`
/// (the `artq sim --json` object; None on failure). Releases the GIL. A
/// scenario that cannot even be built raises, as `sim()` does.
#[pyfunction]
#[pyo3(signature = (scenario, group, scheme, seed))]
fn run_case(
    py: Python<'_>,
    scenario: Option<&Bound<'_, PyDict>>,
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
    let row_json = serde_json::to_string(&row).map_err(|e| ArtqError::new_err(e.to_string()))?;
    let out = json_to_python(py, &row_json)?;
    let dict = out.bind(py).downcast::<PyDict>()?;
    dict.set_item("error", row.error.as_deref())?;
    match sim {
        Some(json) => dict.set_item("sim", json_to_python(py, &json)?)?,
        None => dict.set_item("sim", py.None())?,
    }
    Ok(out)
}

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
        .call_method1("dumps", (runs,))?
        .extract()?;
    let runs: Vec<exps::RunRow> = serde_json::from_str(&json)
        .map_err(|e| PyValueError::new_err(format!("not rows of run_case: {e}")))?;
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
    m.add("ArtqError", m.py().get_type::<ArtqError>())?;
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add(
        "ScenarioFileNotFound",
        m.py().get_type::<ScenarioFileNotFound>(),
    )?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
