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
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use lab::experiments::{self as exps, report, Scale, EXPERIMENTS};
use lab::Scenario;

create_exception!(
    _artq,
    ArtqError,
    PyException,
    "Base class of artq's errors."
);
create_exception!(
    _artq,
    ScenarioError,
    ArtqError,
    "A scenario that cannot run: an unknown key, a bad value, a missing trace, an unknown scheme."
);

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
        merged.update(o.as_mapping())?;
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
        .map_err(|e| ScenarioError::new_err(e.to_string()))?;
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
    recovery::SCHEMES.to_vec()
}

/// The experiments of `reproduce`, as (name, title) pairs.
#[pyfunction]
fn experiments() -> Vec<(&'static str, &'static str)> {
    EXPERIMENTS
        .iter()
        .filter_map(|n| exps::experiment(n, Scale::Tiny).map(|e| (e.name, e.title)))
        .collect()
}

/// Regenerate the papers' evaluations, as `artq reproduce` does: `names`
/// (all when None) at quick scale (or the paper's with `quick=False`),
/// written to `out` (CSV, charts, `report.md`). Returns the paths written.
/// Progress goes to stderr unless `progress=False`.
#[pyfunction]
#[pyo3(signature = (names=None, quick=true, out="artq-out".to_string(), jobs=None, progress=true))]
fn reproduce(
    py: Python<'_>,
    names: Option<Vec<String>>,
    quick: bool,
    out: String,
    jobs: Option<usize>,
    progress: bool,
) -> PyResult<Py<PyAny>> {
    let scale = if quick { Scale::Quick } else { Scale::Full };
    // None: every experiment; an empty list: none (`select` reads an empty
    // list as "all", as the command line does).
    let chosen = match names {
        Some(names) if names.is_empty() => Vec::new(),
        names => exps::select(&names.unwrap_or_default(), scale).map_err(ArtqError::new_err)?,
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

/// The module `artq._artq`; the package `artq` re-exports it.
#[pymodule]
fn _artq(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sim, m)?)?;
    m.add_function(wrap_pyfunction!(default_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(schemes, m)?)?;
    m.add_function(wrap_pyfunction!(experiments, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce, m)?)?;
    m.add("ArtqError", m.py().get_type::<ArtqError>())?;
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
