//! Hand-written PTX kernels.
