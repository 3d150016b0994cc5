//! TEMPORARY stub (replaced by the real module at merge).
#![allow(missing_docs)]
use std::path::{Path, PathBuf};
pub type Key = [u8; 20];
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BloomParams {
    pub bits: u8,
    pub hashes: u8,
}
impl Default for BloomParams {
    fn default() -> Self {
        BloomParams {
            bits: 30,
            hashes: 6,
        }
    }
}
#[derive(Debug, thiserror::Error)]
pub enum BloomError {
    #[error("io {path:?}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}
pub struct BloomFile {
    bits: std::collections::HashSet<Key>,
    params: BloomParams,
    path: PathBuf,
}
impl BloomFile {
    pub fn create(path: &Path, params: BloomParams) -> Result<BloomFile, BloomError> {
        std::fs::write(path, b"x").map_err(|source| BloomError::Io {
            path: path.into(),
            source,
        })?;
        Ok(BloomFile {
            bits: Default::default(),
            params,
            path: path.into(),
        })
    }
    pub fn open(path: &Path) -> Result<BloomFile, BloomError> {
        std::fs::read(path).map_err(|source| BloomError::Io {
            path: path.into(),
            source,
        })?;
        Ok(BloomFile {
            bits: Default::default(),
            params: BloomParams::default(),
            path: path.into(),
        })
    }
    pub fn params(&self) -> BloomParams {
        self.params
    }
    pub fn contains(&self, key: &Key) -> bool {
        self.bits.contains(key)
    }
    pub fn insert(&mut self, key: &Key) -> bool {
        self.bits.insert(*key)
    }
    pub fn flush(&mut self) -> Result<(), BloomError> {
        Ok(())
    }
    pub fn ones(&self) -> u64 {
        self.bits.len() as u64 * 6
    }
    pub fn fill_ratio(&self) -> f64 {
        0.0
    }
    pub fn fpr_estimate(&self) -> f64 {
        0.0
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
}
