//! Parquet datasets, one row per env step: `eps_id`, `t`, `obs`, `actions`, `rewards`,
//! `terminated`, `truncated`, `new_obs` and optionally `action_logp`. Vectors are
//! fixed-size lists of float32, a discrete action an int64. The spaces and per-row shapes go
//! in the schema's key-value metadata (`rl.observation_space`, `rl.action_space`,
//! `rl.obs_shape`, `rl.act_shape`); files without them (written by pyarrow, say) are read
//! from the column types, variable-length lists of one length included.
//!
//! Writing streams row groups to a temporary file renamed into place at the end; reading
//! decodes one row group at a time.

use crate::dataset::{DatasetError, DatasetSpec, Transitions};
use arrow_array::{
    Array, ArrayRef, BooleanArray, FixedSizeListArray, Float32Array, Int64Array, LargeListArray,
    ListArray, RecordBatch,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use rl_training_core::Space;
use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rows per row group unless told otherwise.
pub const DEFAULT_ROWS_PER_GROUP: usize = 65_536;

const META_OBS_SPACE: &str = "rl.observation_space";
const META_ACT_SPACE: &str = "rl.action_space";
const META_OBS_SHAPE: &str = "rl.obs_shape";
const META_ACT_SHAPE: &str = "rl.act_shape";

fn list_type(width: usize) -> DataType {
    DataType::FixedSizeList(
        Arc::new(Field::new("item", DataType::Float32, false)),
        width as i32,
    )
}

fn schema_for(spec: &DatasetSpec, with_logp: bool) -> Schema {
    let discrete = spec.discrete_actions && spec.act_dim() == 1 && spec.act_shape.is_empty();
    let mut fields = vec![
        Field::new("eps_id", DataType::Int64, false),
        Field::new("t", DataType::Int64, false),
        Field::new("obs", list_type(spec.obs_dim()), false),
        if discrete {
            Field::new("actions", DataType::Int64, false)
        } else {
            Field::new("actions", list_type(spec.act_dim()), false)
        },
        Field::new("terminated", DataType::Boolean, false),
        Field::new("truncated", DataType::Boolean, false),
        Field::new("new_obs", list_type(spec.obs_dim()), false),
    ];
    if spec.has_rewards {
        fields.insert(4, Field::new("rewards", DataType::Float32, false));
    }
    if with_logp {
        fields.push(Field::new("action_logp", DataType::Float32, false));
    }
    let mut meta = HashMap::new();
    let json = |v: &dyn erased::Json| v.json();
    meta.insert(META_OBS_SHAPE.to_string(), json(&spec.obs_shape));
    meta.insert(META_ACT_SHAPE.to_string(), json(&spec.act_shape));
    if let Some(s) = &spec.observation_space {
        meta.insert(META_OBS_SPACE.to_string(), space_json(s).to_string());
    }
    if let Some(s) = &spec.action_space {
        meta.insert(META_ACT_SPACE.to_string(), space_json(s).to_string());
    }
    Schema::new(fields).with_metadata(meta)
}

mod erased {
    /// JSON text of a serializable value (object-safe, for one helper closure).
    pub trait Json {
        fn json(&self) -> String;
    }
    impl<T: serde::Serialize> Json for T {
        fn json(&self) -> String {
            serde_json::to_string(self).expect("serializable")
        }
    }
}

/// Writes a Parquet dataset row group by row group into `<path>.tmp`, renamed to `path` by
/// [`finish`](Self::finish): a crash leaves no partial file under the final name.
pub struct ParquetWriter {
    writer: Option<ArrowWriter<File>>,
    schema: SchemaRef,
    spec: DatasetSpec,
    tmp: PathBuf,
    path: PathBuf,
    with_logp: bool,
    rows: usize,
}

impl ParquetWriter {
    /// Starts a file of data with `spec`; `with_logp`: the data carries `action_logp`.
    pub fn create(
        path: &Path,
        spec: &DatasetSpec,
        with_logp: bool,
        rows_per_group: usize,
    ) -> Result<Self, DatasetError> {
        let name = path.display().to_string();
        let tmp = path.with_extension("parquet.tmp");
        let file = File::create(&tmp).map_err(|e| DatasetError::io(&name, e))?;
        let schema = Arc::new(schema_for(spec, with_logp));
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(rows_per_group.max(1)))
            .set_compression(Compression::SNAPPY)
            .build();
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .map_err(|e| DatasetError::corrupt(&name, None, e.to_string()))?;
        Ok(Self {
            writer: Some(writer),
            schema,
            spec: spec.clone(),
            tmp,
            path: path.to_path_buf(),
            with_logp,
            rows: 0,
        })
    }

    /// Appends rows (widths as the spec's).
    pub fn write(&mut self, data: &Transitions) -> Result<(), DatasetError> {
        let name = self.path.display().to_string();
        if data.obs_dim != self.spec.obs_dim() || data.act_dim != self.spec.act_dim() {
            return Err(DatasetError::column(
                &name,
                "obs/actions",
                format!(
                    "rows of {} observation and {} action values, the file holds {} and {}",
                    data.obs_dim,
                    data.act_dim,
                    self.spec.obs_dim(),
                    self.spec.act_dim()
                ),
            ));
        }
        if self.with_logp && data.action_logp.is_none() {
            return Err(DatasetError::column(
                &name,
                "action_logp",
                "missing in rows",
            ));
        }
        let list = |v: &[f32], w: usize| -> ArrayRef {
            let values = Arc::new(Float32Array::from(v.to_vec()));
            let field = Arc::new(Field::new("item", DataType::Float32, false));
            Arc::new(
                FixedSizeListArray::try_new(field, w as i32, values, None)
                    .expect("widths checked above"),
            )
        };
        let actions: ArrayRef = match self
            .schema
            .field_with_name("actions")
            .map(|f| f.data_type())
        {
            Ok(DataType::Int64) => Arc::new(Int64Array::from(
                data.actions.iter().map(|&a| a as i64).collect::<Vec<_>>(),
            )),
            _ => list(&data.actions, data.act_dim),
        };
        let mut cols: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(data.eps_id.clone())),
            Arc::new(Int64Array::from(data.t.clone())),
            list(&data.obs, data.obs_dim),
            actions,
        ];
        if self.spec.has_rewards {
            cols.push(Arc::new(Float32Array::from(data.rewards.clone())));
        }
        cols.extend::<[ArrayRef; 2]>([
            Arc::new(BooleanArray::from(data.terminated.clone())),
            Arc::new(BooleanArray::from(data.truncated.clone())),
        ]);
        cols.push(list(&data.new_obs, data.obs_dim));
        if self.with_logp {
            cols.push(Arc::new(Float32Array::from(
                data.action_logp.clone().unwrap_or_default(),
            )));
        }
        let batch = RecordBatch::try_new(self.schema.clone(), cols)
            .map_err(|e| DatasetError::corrupt(&name, None, e.to_string()))?;
        self.writer
            .as_mut()
            .expect("open until finish")
            .write(&batch)
            .map_err(|e| DatasetError::corrupt(&name, None, e.to_string()))?;
        self.rows += data.len();
        Ok(())
    }

    /// Rows written so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Writes the footer and moves the file into place.
    pub fn finish(mut self) -> Result<(), DatasetError> {
        let name = self.path.display().to_string();
        let w = self.writer.take().expect("open until finish");
        let file = w
            .into_inner()
            .map_err(|e| DatasetError::corrupt(&name, None, e.to_string()))?;
        file.sync_all().map_err(|e| DatasetError::io(&name, e))?;
        std::fs::rename(&self.tmp, &self.path).map_err(|e| DatasetError::io(&name, e))
    }
}

impl Drop for ParquetWriter {
    fn drop(&mut self) {
        // Not finished (an error or a panic): remove the partial temporary file.
        if self.writer.is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `data` to `path` in row groups of `rows_per_group`.
pub fn write_parquet(
    path: &Path,
    data: &Transitions,
    spec: &DatasetSpec,
    rows_per_group: usize,
) -> Result<(), DatasetError> {
    let mut w = ParquetWriter::create(path, spec, data.action_logp.is_some(), rows_per_group)?;
    let step = rows_per_group.max(1);
    for start in (0..data.len()).step_by(step) {
        w.write(&data.slice(start..(start + step).min(data.len())))?;
    }
    w.finish()
}

/// An opened Parquet dataset: its footer is read, row groups are decoded on demand.
#[derive(Debug, Clone)]
pub struct ParquetDataset {
    path: PathBuf,
    name: String,
    meta: ArrowReaderMetadata,
    spec: DatasetSpec,
}

impl ParquetDataset {
    /// Opens `path` and works out its spec from the schema (and its metadata).
    pub fn open(path: &Path) -> Result<Self, DatasetError> {
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| DatasetError::io(&name, e))?;
        let meta = guard(&name, None, || {
            ArrowReaderMetadata::load(&file, ArrowReaderOptions::new()).map_err(|e| {
                DatasetError::corrupt(&name, None, format!("not a readable Parquet file: {e}"))
            })
        })?;
        check_metadata(&meta, &name)?;
        let spec = spec_from_schema(meta.schema(), &name)?;
        // Each list column's width must be known up front; variable-length lists (pyarrow's
        // default) get theirs from the first row group.
        let mut ds = Self {
            path: path.to_path_buf(),
            name,
            meta,
            spec,
        };
        if ds.spec.obs_shape.is_empty() || ds.spec.act_shape == [usize::MAX] {
            ds.infer_widths()?;
        }
        Ok(ds)
    }

    fn infer_widths(&mut self) -> Result<(), DatasetError> {
        if self.num_row_groups() == 0 {
            return Err(DatasetError::corrupt(&self.name, None, "no rows"));
        }
        let batch = self.read_batch(0)?;
        if self.spec.obs_shape.is_empty() {
            let (_, w) = float_column(&batch, "obs", &self.name, Some(0))?;
            self.spec.obs_shape = vec![w.unwrap_or(1)];
        }
        if self.spec.act_shape == [usize::MAX] {
            let (_, w) = float_column(&batch, "actions", &self.name, Some(0))?;
            self.spec.act_shape = w.map_or(Vec::new(), |w| vec![w]);
        }
        Ok(())
    }

    /// What the file declares.
    pub fn spec(&self) -> &DatasetSpec {
        &self.spec
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of row groups.
    pub fn num_row_groups(&self) -> usize {
        self.meta.metadata().num_row_groups()
    }

    /// Number of rows.
    pub fn num_rows(&self) -> usize {
        let m = self.meta.metadata();
        // Saturating: the counts are the footer's, checked against the data only when a row
        // group is read.
        (0..m.num_row_groups())
            .map(|g| m.row_group(g).num_rows() as usize)
            .fold(0usize, usize::saturating_add)
    }

    fn read_batch(&self, g: usize) -> Result<RecordBatch, DatasetError> {
        guard(&self.name, Some(g), || self.read_batch_unguarded(g))
    }

    fn read_batch_unguarded(&self, g: usize) -> Result<RecordBatch, DatasetError> {
        let file = File::open(&self.path).map_err(|e| DatasetError::io(&self.name, e))?;
        let rows = self.meta.metadata().row_group(g).num_rows() as usize;
        // Decoded in batches of at most 64k rows: the footer's row count is not trusted with
        // an allocation before the data backs it.
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(file, self.meta.clone())
            .with_row_groups(vec![g])
            .with_batch_size(rows.clamp(1, 1 << 16))
            .build()
            .map_err(|e| DatasetError::corrupt(&self.name, Some(g), e.to_string()))?;
        let batches = reader
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| DatasetError::corrupt(&self.name, Some(g), e.to_string()))?;
        let batch = match batches.len() {
            1 => batches.into_iter().next().expect("one"),
            _ => arrow_select_concat(&self.meta.schema().clone(), &batches)
                .map_err(|e| DatasetError::corrupt(&self.name, Some(g), e))?,
        };
        // The stream plans its passes by the footer's counts: a footer that claims more (or
        // fewer) rows than the columns hold would have it cycle over a few rows for as many
        // batches as the claim (found by the `parquet` fuzz target).
        if batch.num_rows() != rows {
            return Err(DatasetError::corrupt(
                &self.name,
                Some(g),
                format!(
                    "the footer declares {rows} rows, the columns hold {}",
                    batch.num_rows()
                ),
            ));
        }
        Ok(batch)
    }

    /// Decodes row group `g`, checking widths against the spec and values for finiteness.
    pub fn read_row_group(&self, g: usize) -> Result<Transitions, DatasetError> {
        let batch = self.read_batch(g)?;
        let n = batch.num_rows();
        let (od, ad) = (self.spec.obs_dim(), self.spec.act_dim());
        let name = &self.name;
        let wide = |col: &str, want: usize| -> Result<Vec<f32>, DatasetError> {
            let (v, w) = float_column(&batch, col, name, Some(g))?;
            let w = w.unwrap_or(1);
            if w != want {
                return Err(DatasetError::column(
                    name,
                    col,
                    format!("row group {g} has rows of {w} values, expected {want}"),
                ));
            }
            Ok(v)
        };
        let mut d = Transitions::new(od, ad);
        d.obs = wide("obs", od)?;
        d.new_obs = wide("new_obs", od)?;
        d.actions = wide("actions", ad)?;
        d.rewards = if self.spec.has_rewards {
            wide("rewards", 1)?
        } else {
            vec![0.0; n]
        };
        d.eps_id = int_column(&batch, "eps_id", name, g)?;
        d.t = int_column(&batch, "t", name, g)?;
        d.terminated = bool_column(&batch, "terminated", name, g)?;
        d.truncated = bool_column(&batch, "truncated", name, g)?;
        if batch.schema().column_with_name("action_logp").is_some() {
            d.action_logp = Some(wide("action_logp", 1)?);
        }
        debug_assert_eq!(d.len(), n);
        d.check_values(name, self.spec.action_space.as_ref())
            .map_err(|e| match e {
                DatasetError::Column {
                    file,
                    column,
                    reason,
                } => DatasetError::Column {
                    file,
                    column,
                    reason: format!("row group {g}: {reason}"),
                },
                other => other,
            })?;
        Ok(d)
    }

    /// All rows (small files; large ones stream through [`crate::stream`]).
    pub fn read_all(&self) -> Result<Transitions, DatasetError> {
        let mut d = Transitions::new(self.spec.obs_dim(), self.spec.act_dim());
        for g in 0..self.num_row_groups() {
            d.extend(&self.read_row_group(g)?);
        }
        Ok(d)
    }
}

/// Checks what the parquet crate would otherwise panic on or allocate for blindly: negative
/// row counts, offsets and sizes in the footer (found by the `parquet` fuzz target).
fn check_metadata(meta: &ArrowReaderMetadata, name: &str) -> Result<(), DatasetError> {
    let m = meta.metadata();
    for g in 0..m.num_row_groups() {
        let rg = m.row_group(g);
        if rg.num_rows() < 0 {
            return Err(DatasetError::corrupt(
                name,
                Some(g),
                format!("negative row count {}", rg.num_rows()),
            ));
        }
        for (c, col) in rg.columns().iter().enumerate() {
            let start = col
                .dictionary_page_offset()
                .unwrap_or(col.data_page_offset());
            if start < 0 || col.data_page_offset() < 0 || col.compressed_size() < 0 {
                return Err(DatasetError::corrupt(
                    name,
                    Some(g),
                    format!("column chunk {c} has a negative offset or size"),
                ));
            }
        }
    }
    Ok(())
}

/// Runs a call into the parquet/arrow readers, turning a panic on a malformed file into an
/// error naming the file (the readers assert on some inconsistencies instead of returning
/// errors; library code here must not panic on user input).
fn guard<T>(
    name: &str,
    row_group: Option<usize>,
    f: impl FnOnce() -> Result<T, DatasetError>,
) -> Result<T, DatasetError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = rl_training_core::vec_env::panic_message(p.as_ref());
        Err(DatasetError::corrupt(
            name,
            row_group,
            format!("malformed Parquet file: {msg}"),
        ))
    })
}

/// A space as JSON, with infinite bounds as the strings `"inf"` / `"-inf"` (JSON numbers
/// cannot hold them).
pub fn space_json(space: &Space) -> serde_json::Value {
    use serde_json::json;
    let bound = |v: &[f32]| -> serde_json::Value {
        v.iter()
            .map(|&x| {
                if x.is_finite() {
                    json!(x)
                } else if x > 0.0 {
                    json!("inf")
                } else if x < 0.0 {
                    json!("-inf")
                } else {
                    json!("nan")
                }
            })
            .collect()
    };
    match space {
        Space::Box { low, high, shape } => {
            json!({"type": "Box", "low": bound(low), "high": bound(high), "shape": shape})
        }
        Space::Tuple { spaces } => {
            json!({"type": "Tuple", "spaces": spaces.iter().map(space_json).collect::<Vec<_>>()})
        }
        Space::Dict { spaces } => json!({"type": "Dict", "spaces": spaces
            .iter()
            .map(|(k, s)| json!([k, space_json(s)]))
            .collect::<Vec<_>>()}),
        other => serde_json::to_value(other).expect("serializable"),
    }
}

/// The inverse of [`space_json`].
pub fn space_from_json(v: &serde_json::Value) -> Result<Space, String> {
    let bound = |v: &serde_json::Value| -> Result<Vec<f32>, String> {
        v.as_array()
            .ok_or("bounds: expected a list")?
            .iter()
            .map(|x| match x {
                serde_json::Value::Number(n) => Ok(n.as_f64().unwrap_or(f64::NAN) as f32),
                serde_json::Value::String(s) if s == "inf" => Ok(f32::INFINITY),
                serde_json::Value::String(s) if s == "-inf" => Ok(f32::NEG_INFINITY),
                serde_json::Value::String(s) if s == "nan" => Ok(f32::NAN),
                other => Err(format!("bound {other}: expected a number or \"inf\"")),
            })
            .collect()
    };
    match v.get("type").and_then(|t| t.as_str()) {
        Some("Box") => Ok(Space::Box {
            low: bound(&v["low"])?,
            high: bound(&v["high"])?,
            shape: serde_json::from_value(v["shape"].clone()).map_err(|e| format!("shape: {e}"))?,
        }),
        Some("Tuple") => Ok(Space::Tuple {
            spaces: v["spaces"]
                .as_array()
                .ok_or("spaces: expected a list")?
                .iter()
                .map(space_from_json)
                .collect::<Result<_, _>>()?,
        }),
        Some("Dict") => Ok(Space::Dict {
            spaces: v["spaces"]
                .as_array()
                .ok_or("spaces: expected a list")?
                .iter()
                .map(|kv| {
                    let k = kv[0].as_str().ok_or("dict key: expected a string")?;
                    Ok((k.to_string(), space_from_json(&kv[1])?))
                })
                .collect::<Result<_, String>>()?,
        }),
        _ => serde_json::from_value(v.clone()).map_err(|e| e.to_string()),
    }
}

fn arrow_select_concat(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<RecordBatch, String> {
    arrow_select::concat::concat_batches(schema, batches).map_err(|e| e.to_string())
}

/// Spec from the schema: shapes from `rl.*` metadata where present, else from the column
/// types (`obs_shape` empty / `act_shape` `[usize::MAX]`: to be read from the data).
fn spec_from_schema(schema: &Schema, file: &str) -> Result<DatasetSpec, DatasetError> {
    for col in [
        "eps_id",
        "t",
        "obs",
        "actions",
        "terminated",
        "truncated",
        "new_obs",
    ] {
        if schema.column_with_name(col).is_none() {
            return Err(DatasetError::column(
                file,
                col,
                "missing (a dataset has eps_id, t, obs, actions, terminated, truncated, new_obs and usually rewards)",
            ));
        }
    }
    let meta = schema.metadata();
    let parse = |key: &str| -> Result<Option<serde_json::Value>, DatasetError> {
        meta.get(key)
            .map(|s| {
                serde_json::from_str(s)
                    .map_err(|e| DatasetError::corrupt(file, None, format!("metadata {key}: {e}")))
            })
            .transpose()
    };
    let shape = |key: &str| -> Result<Option<Vec<usize>>, DatasetError> {
        parse(key)?
            .map(|v| {
                serde_json::from_value(v)
                    .map_err(|e| DatasetError::corrupt(file, None, format!("metadata {key}: {e}")))
            })
            .transpose()
    };
    let space = |key: &str| -> Result<Option<rl_training_core::Space>, DatasetError> {
        parse(key)?
            .map(|v| {
                space_from_json(&v)
                    .map_err(|e| DatasetError::corrupt(file, None, format!("metadata {key}: {e}")))
            })
            .transpose()
    };
    let width = |col: &str| match schema.field_with_name(col).map(|f| f.data_type().clone()) {
        Ok(DataType::FixedSizeList(_, w)) => Some(Some(w as usize)),
        Ok(DataType::List(_) | DataType::LargeList(_)) => None,
        _ => Some(None),
    };
    let act_type = schema
        .field_with_name("actions")
        .map(|f| f.data_type().clone())
        .expect("checked above");
    let discrete_actions = act_type.is_integer()
        || matches!(&act_type, DataType::FixedSizeList(f, _) | DataType::List(f) | DataType::LargeList(f) if f.data_type().is_integer());
    let obs_shape = match shape(META_OBS_SHAPE)? {
        Some(s) => s,
        None => match width("obs") {
            Some(Some(w)) => vec![w],
            Some(None) => vec![1],
            None => Vec::new(),
        },
    };
    let act_shape = match shape(META_ACT_SHAPE)? {
        Some(s) => s,
        None => match width("actions") {
            Some(Some(w)) => vec![w],
            Some(None) => Vec::new(),
            None => vec![usize::MAX],
        },
    };
    Ok(DatasetSpec {
        obs_shape,
        act_shape,
        discrete_actions,
        observation_space: space(META_OBS_SPACE)?,
        action_space: space(META_ACT_SPACE)?,
        has_rewards: schema.column_with_name("rewards").is_some(),
    })
}

fn column<'a>(batch: &'a RecordBatch, col: &str, file: &str) -> Result<&'a ArrayRef, DatasetError> {
    batch
        .column_by_name(col)
        .ok_or_else(|| DatasetError::column(file, col, "missing"))
}

fn no_nulls(a: &dyn Array, col: &str, file: &str, g: usize) -> Result<(), DatasetError> {
    if a.null_count() > 0 {
        return Err(DatasetError::column(
            file,
            col,
            format!("row group {g} holds {} null values", a.null_count()),
        ));
    }
    Ok(())
}

fn to_f32(values: &ArrayRef, col: &str, file: &str, g: usize) -> Result<Vec<f32>, DatasetError> {
    no_nulls(values.as_ref(), col, file, g)?;
    let cast = arrow_cast::cast(values, &DataType::Float32).map_err(|e| {
        DatasetError::column(
            file,
            col,
            format!("values of type {} are not numbers: {e}", values.data_type()),
        )
    })?;
    let f = cast
        .as_any()
        .downcast_ref::<Float32Array>()
        .expect("cast to Float32");
    Ok(f.values().to_vec())
}

/// A numeric column as f32 rows: `(values, Some(width))` for list columns, `(values, None)`
/// for scalars.
fn float_column(
    batch: &RecordBatch,
    col: &str,
    file: &str,
    g: Option<usize>,
) -> Result<(Vec<f32>, Option<usize>), DatasetError> {
    let g = g.unwrap_or(0);
    let a = column(batch, col, file)?;
    no_nulls(a.as_ref(), col, file, g)?;
    let any = a.as_any();
    if let Some(l) = any.downcast_ref::<FixedSizeListArray>() {
        let w = l.value_length() as usize;
        let v = l.values().slice(l.offset() * w, l.len() * w);
        return Ok((to_f32(&v, col, file, g)?, Some(w)));
    }
    let offsets: Option<(Vec<usize>, ArrayRef)> = if let Some(l) = any.downcast_ref::<ListArray>() {
        Some((
            l.value_offsets().iter().map(|&o| o as usize).collect(),
            l.values().clone(),
        ))
    } else {
        any.downcast_ref::<LargeListArray>().map(|l| {
            (
                l.value_offsets().iter().map(|&o| o as usize).collect(),
                l.values().clone(),
            )
        })
    };
    if let Some((off, values)) = offsets {
        let w = if off.len() > 1 { off[1] - off[0] } else { 0 };
        if let Some(i) = off.windows(2).position(|p| p[1] - p[0] != w) {
            return Err(DatasetError::column(
                file,
                col,
                format!(
                    "row group {g}: row {i} has {} values, row 0 has {w}",
                    off[i + 1] - off[i]
                ),
            ));
        }
        let start = off.first().copied().unwrap_or(0);
        let v = values.slice(start, off.last().copied().unwrap_or(0) - start);
        return Ok((to_f32(&v, col, file, g)?, Some(w)));
    }
    Ok((to_f32(a, col, file, g)?, None))
}

fn int_column(
    batch: &RecordBatch,
    col: &str,
    file: &str,
    g: usize,
) -> Result<Vec<i64>, DatasetError> {
    let a = column(batch, col, file)?;
    no_nulls(a.as_ref(), col, file, g)?;
    let cast = arrow_cast::cast(a, &DataType::Int64).map_err(|e| {
        DatasetError::column(
            file,
            col,
            format!("type {} is not an integer: {e}", a.data_type()),
        )
    })?;
    Ok(cast
        .as_any()
        .downcast_ref::<Int64Array>()
        .expect("cast to Int64")
        .values()
        .to_vec())
}

fn bool_column(
    batch: &RecordBatch,
    col: &str,
    file: &str,
    g: usize,
) -> Result<Vec<bool>, DatasetError> {
    let a = column(batch, col, file)?;
    no_nulls(a.as_ref(), col, file, g)?;
    let cast = arrow_cast::cast(a, &DataType::Boolean).map_err(|e| {
        DatasetError::column(
            file,
            col,
            format!("type {} is not a flag: {e}", a.data_type()),
        )
    })?;
    let b = cast
        .as_any()
        .downcast_ref::<BooleanArray>()
        .expect("cast to Boolean");
    Ok((0..b.len()).map(|i| b.value(i)).collect())
}
