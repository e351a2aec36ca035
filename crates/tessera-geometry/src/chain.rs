//! Value-dependent chains. (to be written)
