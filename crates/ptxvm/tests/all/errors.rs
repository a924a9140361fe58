//! Load errors and runtime faults.
