//! `turnscope bench console`: placeholder replaced below.
