//! What a request selects, in array coordinates: regions (integers and step-1 slices) and
//! picks (steps, index arrays, points, masks), parsed and checked against the array's shape,
//! with NumPy's indexing rules (`key`, `numpy`) and zarr-python's orthogonal and block
//! selections (`orthogonal`). Pure geometry.

pub mod key;
pub mod numpy;
pub mod orthogonal;
pub mod pick;
pub mod positions;
pub mod selection;
