//! Python bindings of the Lookaside engine: thin, no logic. Each function converts its
//! arguments, calls one entry point of the engine (or of `lookaside-papers`, for a paper's
//! tables) with the GIL released, and maps engine errors to the Python exceptions below (one
//! place: [`to_py`]). Results cross as JSON text, which the Python layer turns into objects
//! and DataFrames; a one-pass family's figures cross as columns (lists), one call for all its
//! geometries.

use std::path::PathBuf;

use lookaside::machine::{Machine, MemoryLimit};
use lookaside::report::Figures;
use lookaside::run::{Progress, Reading};
use lookaside::trace::Format;
use lookaside::Error;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyDict;

pyo3::create_exception!(
    _lookaside,
    LookasideError,
    PyException,
    "Any error Lookaside reports."
);
pyo3::create_exception!(
    _lookaside,
    TraceError,
    LookasideError,
    "A trace file is unreadable or malformed."
);
pyo3::create_exception!(
    _lookaside,
    ConfigError,
    LookasideError,
    "A machine description is invalid."
);
pyo3::create_exception!(
    _lookaside,
    NotYetError,
    LookasideError,
    "A capability that is not built yet."
);

fn to_py(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::Trace { .. } | Error::Io { .. } => TraceError::new_err(msg),
        Error::Config { .. } => ConfigError::new_err(msg),
        Error::NotYet(_) => NotYetError::new_err(msg),
        Error::Usage(_) => LookasideError::new_err(msg),
    }
}

/// The machine config of `--config` text (or none) named `name`, with `--tlb` and `--set`
/// flags applied.
fn assemble(
    text: Option<&str>,
    name: &str,
    tlb: &[String],
    set: &[String],
) -> PyResult<lookaside::config::MachineConfig> {
    lookaside::config::MachineConfig::assemble(text, name, tlb, set).map_err(to_py)
}

fn format_arg(format: Option<&str>) -> PyResult<Option<Format>> {
    format
        .map(|f| f.parse::<Format>().map_err(to_py))
        .transpose()
}

/// The machine of `--config` text (or none) named `name`, with `--tlb`, `--cache` and
/// `--set` flags applied, refused when it needs more memory than `max_memory` (a size:
/// `12G`; none: the host's default, see `MemoryLimit::default_for_host`).
fn machine(
    text: Option<&str>,
    name: &str,
    tlb: &[String],
    cache: &[String],
    set: &[String],
    max_memory: Option<&str>,
) -> PyResult<Machine> {
    let limit = match max_memory {
        Some(m) => MemoryLimit::parse(m).map_err(to_py)?,
        None => MemoryLimit::default_for_host(),
    };
    Machine::assemble_all_within(text, name, tlb, cache, set, limit).map_err(to_py)
}

/// Run `work` without the GIL, with a progress callback that calls `progress(events, bytes)`
/// now and then and stops the work on a signal: the exception its Python handler raises
/// (`KeyboardInterrupt` for Ctrl-C) is then raised here, as is one `progress` raises.
fn with_progress<T>(
    py: Python<'_>,
    progress: Option<Py<PyAny>>,
    work: impl FnOnce(&mut dyn FnMut(Progress) -> bool) -> lookaside::Result<T> + Send,
) -> PyResult<lookaside::Result<T>>
where
    T: Send,
{
    with_callback(
        py,
        progress,
        |py, f, p: Progress| f.call1(py, (p.events, p.bytes)).map(drop),
        work,
    )
}

/// [`with_progress`] for any callback: `call(py, callback, argument)` calls the Python
/// callable (when there is one) after checking for signals.
fn with_callback<T, A>(
    py: Python<'_>,
    callback: Option<Py<PyAny>>,
    call: impl Fn(Python<'_>, &Py<PyAny>, A) -> PyResult<()> + Send + Sync,
    work: impl FnOnce(&mut dyn FnMut(A) -> bool) -> lookaside::Result<T> + Send,
) -> PyResult<lookaside::Result<T>>
where
    T: Send,
{
    let mut raised: Option<PyErr> = None;
    let result = py.detach(|| {
        let mut cb = |a: A| {
            Python::attach(|py| {
                let outcome = py.check_signals().and_then(|()| match &callback {
                    Some(f) => call(py, f, a),
                    None => Ok(()),
                });
                match outcome {
                    Ok(()) => true,
                    Err(e) => {
                        raised.get_or_insert(e);
                        false
                    }
                }
            })
        };
        work(&mut cb)
    });
    match raised {
        Some(e) => Err(e),
        None => Ok(result),
    }
}

/// Simulate a trace file; returns the result as JSON text. `progress(events, bytes)` is
/// called now and then; Ctrl-C stops the run.
#[pyfunction]
#[pyo3(signature = (trace, config_text, config_name, tlb=vec![], set=vec![], format=None, progress=None, reading=None, max_memory=None, cache=vec![]))]
#[allow(clippy::too_many_arguments)]
fn simulate(
    py: Python<'_>,
    trace: PathBuf,
    config_text: Option<String>,
    config_name: String,
    tlb: Vec<String>,
    set: Vec<String>,
    format: Option<String>,
    progress: Option<Py<PyAny>>,
    reading: Option<String>,
    max_memory: Option<String>,
    cache: Vec<String>,
) -> PyResult<String> {
    let mut m = machine(
        config_text.as_deref(),
        &config_name,
        &tlb,
        &cache,
        &set,
        max_memory.as_deref(),
    )?;
    let format = format_arg(format.as_deref())?;
    let reading: Reading = reading
        .as_deref()
        .unwrap_or("auto")
        .parse()
        .map_err(|m: String| to_py(lookaside::Error::Usage(m)))?;
    let result = with_progress(py, progress, |cb| {
        lookaside::run::simulate_path(&trace, format, &mut m, reading, cb)
    })?;
    result.map(|v| v.to_string()).map_err(to_py)
}

/// Simulate several machines, each `(config_text, config_name, tlb, set)`, on one reading
/// of a trace; returns a JSON list of their results, each what `simulate` gives for that
/// machine alone.
#[pyfunction]
#[pyo3(signature = (trace, machines, format=None, progress=None, max_memory=None))]
#[allow(clippy::type_complexity)]
fn simulate_many(
    py: Python<'_>,
    trace: PathBuf,
    machines: Vec<(Option<String>, String, Vec<String>, Vec<String>)>,
    format: Option<String>,
    progress: Option<Py<PyAny>>,
    max_memory: Option<String>,
) -> PyResult<String> {
    let mut ms = machines
        .iter()
        .map(|(text, name, tlb, set)| {
            machine(text.as_deref(), name, tlb, &[], set, max_memory.as_deref())
        })
        .collect::<PyResult<Vec<Machine>>>()?;
    let format = format_arg(format.as_deref())?;
    let result = with_progress(py, progress, |cb| {
        lookaside::run::simulate_many(&trace, format, &mut ms, cb)
    })?;
    result
        .map(|v| serde_json::Value::Array(v).to_string())
        .map_err(to_py)
}

/// The one-pass family of a machine (see `lookaside::onepass::Options::for_machine`): its
/// single TLB's name, entries and ways (ways = entries when fully associative) when the
/// one-pass engines answer the machine at any geometry, else None.
type Family = Option<(String, usize, usize)>;

/// Validate a sweep's machines, each that of `config_text` (or none) named `config_name`
/// with the `tlb` flags and its own `set` overrides, as `check_config` does, in one call.
/// Returns each machine's one-pass family ([`Family`]) in order, up to the first invalid
/// machine, and that machine's index and error (the exception `check_config` raises), or
/// None when all are valid.
#[pyfunction]
#[pyo3(signature = (config_text, config_name, tlb, sets, max_memory=None))]
#[allow(clippy::type_complexity)]
fn check_machines(
    py: Python<'_>,
    config_text: Option<String>,
    config_name: String,
    tlb: Vec<String>,
    sets: Vec<Vec<String>>,
    max_memory: Option<String>,
) -> PyResult<(Vec<Family>, Option<(usize, Py<PyAny>)>)> {
    let limit = match max_memory.as_deref() {
        Some(m) => MemoryLimit::parse(m).map_err(to_py)?,
        None => MemoryLimit::default_for_host(),
    };
    let (families, failure) = py.detach(|| {
        let mut families = Vec::with_capacity(sets.len());
        for (i, set) in sets.iter().enumerate() {
            match Machine::assemble_within(config_text.as_deref(), &config_name, &tlb, set, limit) {
                Ok(m) => families.push(family(m.config())),
                Err(e) => return (families, Some((i, e))),
            }
        }
        (families, None)
    });
    let failure = failure.map(|(i, e)| (i, to_py(e).into_value(py).into_any()));
    Ok((families, failure))
}

fn family(config: &lookaside::config::MachineConfig) -> Family {
    lookaside::onepass::Options::for_machine(config).ok()?;
    let t = &config.tlbs[0];
    let ways = match t.ways {
        lookaside::config::Ways::Full => t.entries,
        lookaside::config::Ways::N(n) => n,
    };
    Some((t.name.clone(), t.entries, ways))
}

/// Validate a machine and return it as normalised TOML (defaults filled in).
#[pyfunction]
#[pyo3(signature = (config_text, config_name, tlb=vec![], set=vec![], max_memory=None, cache=vec![]))]
fn check_config(
    config_text: Option<String>,
    config_name: String,
    tlb: Vec<String>,
    set: Vec<String>,
    max_memory: Option<String>,
    cache: Vec<String>,
) -> PyResult<String> {
    let m = machine(
        config_text.as_deref(),
        &config_name,
        &tlb,
        &cache,
        &set,
        max_memory.as_deref(),
    )?;
    Ok(m.config().to_toml())
}

/// A machine given as data (the JSON of its config, as `check_config`'s TOML reads) as
/// normalised TOML: so that recipes build machines as data, not by editing text. Keys and
/// types are the engine's schema; a bad one is a `ConfigError` naming it.
#[pyfunction]
fn config_toml(config_json: &str, config_name: &str) -> PyResult<String> {
    let c: lookaside::config::MachineConfig = serde_json::from_str(config_json)
        .map_err(|e| ConfigError::new_err(format!("{config_name}: {e}")))?;
    Ok(c.to_toml())
}

/// The machine description's JSON Schema (`lookaside::config::json_schema`), as JSON text.
#[pyfunction]
fn config_schema() -> String {
    lookaside::config::json_schema().to_string()
}

/// Bytes of a page size written as the engine reads it (`4k`, `2M`, `8192`): the one parser,
/// so that the Python layer does not repeat its rules.
#[pyfunction]
fn page_bytes(text: &str) -> PyResult<u64> {
    match lookaside::config::PageSize::parse(text) {
        Ok(lookaside::config::PageSize::Size(n)) => Ok(n),
        Ok(lookaside::config::PageSize::Unmapped) => Err(LookasideError::new_err(format!(
            "page: '{text}' is not a page size (e.g. 4k, 2M, 1G)"
        ))),
        Err(m) => Err(LookasideError::new_err(format!("page: {m}"))),
    }
}

/// Bytes of a size written as the engine reads sizes (`48k`, `64KiB`, `2M`, `8192`), or
/// `None` when it is not one.
#[pyfunction]
fn byte_count(text: &str) -> Option<u64> {
    lookaside::config::parse_bytes(text)
}

/// Whether a one-pass engine answers a TLB of `entries` entries of `ways` ways
/// (`lookaside::onepass::Geometry::answered`).
#[pyfunction]
fn one_pass_answers(entries: usize, ways: usize) -> bool {
    lookaside::onepass::Geometry { entries, ways }.answered()
}

/// Convert a trace between formats; returns the events written and the events left out
/// (those the output format cannot represent). With `phase`, `skip` or `take`, only a window
/// of it (see `lookaside::trace::cut`); `level` is the native output's zstd level; `extra`
/// goes into the output's metadata. `progress(events, bytes)` is called now and then;
/// Ctrl-C stops the conversion and nothing is written.
#[pyfunction]
#[pyo3(signature = (src, dst, src_format=None, dst_format=None, command=String::new(), progress=None, phase=None, skip=0, take=None, level=None, extra=None))]
#[allow(clippy::too_many_arguments)]
fn convert(
    py: Python<'_>,
    src: PathBuf,
    dst: PathBuf,
    src_format: Option<String>,
    dst_format: Option<String>,
    command: String,
    progress: Option<Py<PyAny>>,
    phase: Option<String>,
    skip: u64,
    take: Option<u64>,
    level: Option<i32>,
    extra: Option<std::collections::BTreeMap<String, String>>,
) -> PyResult<(u64, u64)> {
    let (sf, df) = (
        format_arg(src_format.as_deref())?,
        format_arg(dst_format.as_deref())?,
    );
    let mut options = lookaside::trace::WriteOptions::default();
    if let Some(l) = level {
        if !(1..=22).contains(&l) {
            return Err(to_py(lookaside::error::Error::Usage(format!(
                "level: {l} is not a zstd level (1-22)"
            ))));
        }
        options.level = l;
    }
    if let Some(p) = &phase {
        if p.is_empty() || p.len() > 4 || !p.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(to_py(lookaside::error::Error::Usage(format!(
                "phase: '{p}' is not a phase label (1-4 printable ASCII bytes)"
            ))));
        }
    }
    let conversion = lookaside::run::Conversion {
        meta: lookaside::trace::Metadata {
            command: Some(command).filter(|c| !c.is_empty()),
            extra: extra.unwrap_or_default(),
            ..Default::default()
        },
        cut: lookaside::trace::cut::Cut { phase, skip, take },
        options,
    };
    with_progress(py, progress, |cb| {
        lookaside::run::convert_watched(&src, sf, &dst, df, &conversion, cb)
    })?
    .map(|c| (c.written, c.left_out()))
    .map_err(to_py)
}

/// The memory access map of a trace (pages touched per interval of instructions) as JSON
/// text; `select` is "instruction", "data" or "all".
#[pyfunction]
#[pyo3(signature = (path, page_bytes=4096, interval=100_000, select="data", format=None, progress=None))]
fn access_map(
    py: Python<'_>,
    path: PathBuf,
    page_bytes: u64,
    interval: u64,
    select: &str,
    format: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let f = format_arg(format.as_deref())?;
    let select = lookaside::trace::accessmap::Select::parse(select)
        .map_err(|m| to_py(lookaside::error::Error::Usage(format!("select: {m}"))))?;
    if !page_bytes.is_power_of_two() || page_bytes < 2 {
        return Err(to_py(lookaside::error::Error::Usage(format!(
            "page: {page_bytes} is not a power of two"
        ))));
    }
    let shift = page_bytes.trailing_zeros();
    with_progress(py, progress, |cb| {
        lookaside::run::access_map_json(&path, f, shift, interval, select, cb)
    })?
    .map(|v| v.to_string())
    .map_err(to_py)
}

/// Summarise a trace file as JSON text; `progress(events, bytes)` is called now and then,
/// and Ctrl-C stops the reading.
#[pyfunction]
#[pyo3(signature = (path, format=None, progress=None))]
fn info(
    py: Python<'_>,
    path: PathBuf,
    format: Option<String>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let f = format_arg(format.as_deref())?;
    with_progress(py, progress, |cb| lookaside::run::info_json(&path, f, cb))?
        .map(|v| v.to_string())
        .map_err(to_py)
}

/// The trace's metadata as JSON text (`null` when its format has none), from its header
/// alone.
#[pyfunction]
#[pyo3(signature = (path, format=None))]
fn metadata(path: PathBuf, format: Option<String>) -> PyResult<String> {
    let f = format_arg(format.as_deref())?;
    lookaside::run::metadata_json(&path, f)
        .map(|v| v.to_string())
        .map_err(to_py)
}

/// Record a live capture stream (`via` "qemu" or "lackey") read from `src` (a pipe) into
/// the trace `dst`; returns what was written as JSON text. `extra` goes into the trace's
/// metadata; `progress(events, bytes)` is called now and then; Ctrl-C abandons the capture.
#[pyfunction]
#[pyo3(signature = (src, via, dst, command, extra=vec![], level=None, progress=None))]
#[allow(clippy::too_many_arguments)]
fn record(
    py: Python<'_>,
    src: PathBuf,
    via: String,
    dst: PathBuf,
    command: String,
    extra: Vec<(String, String)>,
    level: Option<i32>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    use lookaside::trace::{capture, Metadata, WriteOptions};
    let via: capture::Via = via.parse().map_err(to_py)?;
    let meta = Metadata {
        command: Some(command),
        extra: extra.into_iter().collect(),
        ..Default::default()
    };
    let mut options = WriteOptions::default();
    if let Some(level) = level {
        options.level = level;
    }
    let result = with_progress(py, progress, |cb| {
        capture::record(&src, via, &dst, &meta, &options, cb)
    })?;
    result
        .map(|r| serde_json::to_string(&r).unwrap_or_default())
        .map_err(to_py)
}

/// Run a benchmark plan (JSON text, see `lookaside::bench::Plan`), writing scratch files
/// into `work_dir`; returns every run's figures as JSON text. `say(step)` is called with
/// each step's description, and `say(None)` now and then while a step runs.
#[pyfunction]
#[pyo3(name = "bench", signature = (plan, work_dir, say=None))]
fn run_bench(
    py: Python<'_>,
    plan: &str,
    work_dir: PathBuf,
    say: Option<Py<PyAny>>,
) -> PyResult<String> {
    let plan: lookaside::bench::Plan = serde_json::from_str(plan)
        .map_err(|e| LookasideError::new_err(format!("bench plan: {e}")))?;
    with_callback(
        py,
        say,
        |py, f, step: Option<String>| f.call1(py, (step,)).map(drop),
        |cb| {
            lookaside::bench::run_plan(&plan, &work_dir, &mut |step: Option<&str>| {
                cb(step.map(str::to_string))
            })
        },
    )?
    .map(|v| v.to_string())
    .map_err(to_py)
}

/// Answer the geometries `want` ([(entries, ways)], in any order, repeats allowed) of the
/// machine in one pass over the trace (the one-pass engines, see
/// `lookaside::onepass::answer_path`). Returns what is common to them as JSON text (`trace`,
/// `warnings`, `structure`, `page`, `accesses`) and their figures as columns, one list per
/// field, `want`'s order: `entries`, `ways`, `sets`, `engine`, `misses`, `hits`,
/// `miss_ratio`, `mpki`, `instructions_per_miss` (a walk per miss: the walks' count and
/// rate are `misses` and `mpki`). One call hands over a whole family; nothing per geometry
/// crosses as JSON.
#[pyfunction]
#[pyo3(signature = (trace, config_text, config_name, tlb, set, format, want, progress=None))]
#[allow(clippy::too_many_arguments)]
fn one_pass<'py>(
    py: Python<'py>,
    trace: PathBuf,
    config_text: Option<String>,
    config_name: String,
    tlb: Vec<String>,
    set: Vec<String>,
    format: Option<String>,
    want: Vec<(usize, usize)>,
    progress: Option<Py<PyAny>>,
) -> PyResult<(String, Bound<'py, PyDict>)> {
    let config = assemble(config_text.as_deref(), &config_name, &tlb, &set)?;
    let format = format_arg(format.as_deref())?;
    let want: Vec<lookaside::onepass::Geometry> = want
        .into_iter()
        .map(|(entries, ways)| lookaside::onepass::Geometry { entries, ways })
        .collect();
    let r = with_progress(py, progress, |cb| {
        lookaside::onepass::answer_path(&trace, format, &config, &want, cb)
    })?
    .map_err(to_py)?;
    let figures: Vec<Figures> = (0..r.geometries.len())
        .map(|i| Figures::of(r.counter(i), r.instructions))
        .collect();
    let columns = PyDict::new(py);
    let geometry = |f: fn(&lookaside::onepass::Geometry) -> usize| -> Vec<usize> {
        r.geometries.iter().map(f).collect()
    };
    columns.set_item("entries", geometry(|g| g.entries))?;
    columns.set_item("ways", geometry(|g| g.ways))?;
    columns.set_item("sets", geometry(|g| g.entries / g.ways))?;
    let engines: Vec<&str> = r.methods.iter().map(|m| m.name()).collect();
    columns.set_item("engine", engines)?;
    columns.set_item("misses", &r.misses)?;
    let hits: Vec<u64> = figures.iter().map(|f| f.hits).collect();
    columns.set_item("hits", hits)?;
    let column =
        |f: fn(&Figures) -> Option<f64>| -> Vec<Option<f64>> { figures.iter().map(f).collect() };
    columns.set_item("miss_ratio", column(|f| f.miss_ratio))?;
    columns.set_item("mpki", column(|f| f.mpki))?;
    columns.set_item("instructions_per_miss", column(|f| f.instructions_per_miss))?;
    Ok((r.header_json().to_string(), columns))
}

/// Every cell of Uhlig et al.'s Tables II, VI and VII, ours beside the published one (JSON).
#[pyfunction]
fn uhlig94_cells() -> String {
    lookaside_papers::uhlig94::cells_json().to_string()
}

/// Inouye et al.'s Tables 1-3 and copy-on-write cases on the virtually addressed cache model,
/// under the named timing preset, beside the published numbers (JSON).
#[pyfunction]
#[pyo3(signature = (timing="hp9000-834"))]
fn inouye92_results(py: Python<'_>, timing: &str) -> PyResult<String> {
    py.detach(|| lookaside_papers::inouye92::results(timing))
        .map(|v| v.to_string())
        .map_err(ConfigError::new_err)
}

/// Create the temporary file that will become `path` (see
/// `lookaside::trace::compress::create_partial`: named after it, mode 0666 less the umask,
/// stale ones of dead processes removed) and return its name; the caller writes it and
/// renames it into place. Errors are `OSError`s naming `path`.
#[pyfunction]
fn create_partial(path: PathBuf) -> PyResult<PathBuf> {
    match lookaside::trace::compress::create_partial(&path) {
        Ok((tmp, _file)) => Ok(tmp),
        Err(e) => {
            let text = e.to_string();
            let strerror = text.split(" (os error").next().unwrap_or(&text).to_string();
            Err(pyo3::exceptions::PyOSError::new_err((
                e.raw_os_error().unwrap_or(0),
                strerror,
                path,
            )))
        }
    }
}

/// DineroIV's end-of-run statistics of the caches of a result given as JSON text.
#[pyfunction]
fn dinero(result_json: &str) -> PyResult<String> {
    let v: serde_json::Value = serde_json::from_str(result_json)
        .map_err(|e| LookasideError::new_err(format!("not a Lookaside result: {e}")))?;
    lookaside::cache::hier::dinero_summary(&v).map_err(LookasideError::new_err)
}

/// The plain-text table of a result given as JSON text.
#[pyfunction]
fn table(result_json: &str) -> PyResult<String> {
    let v: serde_json::Value = serde_json::from_str(result_json)
        .map_err(|e| LookasideError::new_err(format!("not a Lookaside result: {e}")))?;
    Ok(lookaside::report::table(&v))
}

#[pymodule]
fn _lookaside(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("LookasideError", m.py().get_type::<LookasideError>())?;
    m.add("TraceError", m.py().get_type::<TraceError>())?;
    m.add("ConfigError", m.py().get_type::<ConfigError>())?;
    m.add("NotYetError", m.py().get_type::<NotYetError>())?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_many, m)?)?;
    m.add_function(wrap_pyfunction!(check_machines, m)?)?;
    m.add_function(wrap_pyfunction!(check_config, m)?)?;
    m.add_function(wrap_pyfunction!(config_schema, m)?)?;
    m.add_function(wrap_pyfunction!(config_toml, m)?)?;
    m.add_function(wrap_pyfunction!(page_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(byte_count, m)?)?;
    m.add_function(wrap_pyfunction!(one_pass_answers, m)?)?;
    m.add_function(wrap_pyfunction!(convert, m)?)?;
    m.add_function(wrap_pyfunction!(info, m)?)?;
    m.add_function(wrap_pyfunction!(metadata, m)?)?;
    m.add_function(wrap_pyfunction!(run_bench, m)?)?;
    m.add_function(wrap_pyfunction!(access_map, m)?)?;
    m.add_function(wrap_pyfunction!(record, m)?)?;
    m.add_function(wrap_pyfunction!(table, m)?)?;
    m.add_function(wrap_pyfunction!(dinero, m)?)?;
    m.add_function(wrap_pyfunction!(create_partial, m)?)?;
    m.add_function(wrap_pyfunction!(one_pass, m)?)?;
    m.add_function(wrap_pyfunction!(uhlig94_cells, m)?)?;
    m.add_function(wrap_pyfunction!(inouye92_results, m)?)?;
    Ok(())
}
