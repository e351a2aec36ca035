//! Search boxes, regions crossed, subspace choice. (to be written)
