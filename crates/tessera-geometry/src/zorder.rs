//! Z-order. (to be written)
