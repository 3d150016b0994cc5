//! Watermarks of `--output` files: which item each file started at.
//!
//! A JSON-lines output file mirrors the item store from the item that was next
//! when the file was first used. Lines already in the file are counted on start,
//! so a resumed run appends exactly the items the file lacks (none twice).

use super::{State, StoreError, crash, keys};

impl State {
    /// The first item sequence number written to the output file `path` (canonical
    /// path string), recording the current end of the item store if it is new.
    pub fn output_start(&mut self, path: &str) -> Result<u64, StoreError> {
        let key = keys::with_prefix(keys::OUTPUT, path.as_bytes());
        if let Some(value) = self.db.get(&key).map_err(|e| self.db_error(e))? {
            let bytes: [u8; 8] = keys::versioned_body(&value)
                .ok_or_else(|| self.corrupt("output", &key, "not a version byte and 8 bytes"))?;
            return Ok(u64::from_be_bytes(bytes));
        }
        let start = self.next_item;
        crash::point("output.watermark");
        self.db
            .insert(&key, keys::versioned(&start.to_be_bytes()))
            .map_err(|e| self.db_error(e))?;
        self.db.flush().map_err(|e| self.db_error(e))?;
        Ok(start)
    }
}
