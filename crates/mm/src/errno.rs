//! Linux error numbers, the only error type of the address-space model.

use std::fmt;

/// A Linux errno, as the system calls the model reproduces return it.
///
/// Every refused call returns one of these, with the value and the
/// precedence the running kernel uses, so a model result can be compared
/// with a real one number for number.
///
/// ```
/// use mm::Errno;
/// assert_eq!(Errno::ENOMEM.code(), 12);
/// assert_eq!(Errno::from_code(22), Some(Errno::EINVAL));
/// assert_eq!(Errno::EEXIST.to_string(), "EEXIST (File exists)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
#[allow(clippy::upper_case_acronyms)]
pub enum Errno {
    /// Operation not permitted (1).
    EPERM = 1,
    /// Bad file descriptor (9).
    EBADF = 9,
    /// Try again (11).
    EAGAIN = 11,
    /// Out of memory, or no room in the address space (12).
    ENOMEM = 12,
    /// Permission denied (13).
    EACCES = 13,
    /// Bad address (14).
    EFAULT = 14,
    /// Device or resource busy (16).
    EBUSY = 16,
    /// File exists (17).
    EEXIST = 17,
    /// No such device (19).
    ENODEV = 19,
    /// Invalid argument (22).
    EINVAL = 22,
    /// Text file busy (26).
    ETXTBSY = 26,
    /// No space left on device (28): `pkey_alloc` with every key taken.
    ENOSPC = 28,
    /// Value too large for defined data type (75).
    EOVERFLOW = 75,
    /// Operation not supported (95).
    EOPNOTSUPP = 95,
}

const ALL: [Errno; 14] = [
    Errno::EPERM,
    Errno::EBADF,
    Errno::EAGAIN,
    Errno::ENOMEM,
    Errno::EACCES,
    Errno::EFAULT,
    Errno::EBUSY,
    Errno::EEXIST,
    Errno::ENODEV,
    Errno::EINVAL,
    Errno::ETXTBSY,
    Errno::ENOSPC,
    Errno::EOVERFLOW,
    Errno::EOPNOTSUPP,
];

impl Errno {
    /// The positive errno value.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The errno with this value, if the model knows it.
    pub fn from_code(code: i32) -> Option<Errno> {
        ALL.into_iter().find(|e| e.code() == code)
    }

    /// The symbolic name, e.g. `"ENOMEM"`.
    pub fn name(self) -> &'static str {
        match self {
            Errno::EPERM => "EPERM",
            Errno::EBADF => "EBADF",
            Errno::EAGAIN => "EAGAIN",
            Errno::ENOMEM => "ENOMEM",
            Errno::EACCES => "EACCES",
            Errno::EFAULT => "EFAULT",
            Errno::EBUSY => "EBUSY",
            Errno::EEXIST => "EEXIST",
            Errno::ENODEV => "ENODEV",
            Errno::EINVAL => "EINVAL",
            Errno::ETXTBSY => "ETXTBSY",
            Errno::ENOSPC => "ENOSPC",
            Errno::EOVERFLOW => "EOVERFLOW",
            Errno::EOPNOTSUPP => "EOPNOTSUPP",
        }
    }

    /// Look an errno up by its symbolic name (as strace prints it).
    pub fn from_name(name: &str) -> Option<Errno> {
        ALL.into_iter().find(|e| e.name() == name)
    }

    fn text(self) -> &'static str {
        match self {
            Errno::EPERM => "Operation not permitted",
            Errno::EBADF => "Bad file descriptor",
            Errno::EAGAIN => "Resource temporarily unavailable",
            Errno::ENOMEM => "Cannot allocate memory",
            Errno::EACCES => "Permission denied",
            Errno::EFAULT => "Bad address",
            Errno::EBUSY => "Device or resource busy",
            Errno::EEXIST => "File exists",
            Errno::ENODEV => "No such device",
            Errno::EINVAL => "Invalid argument",
            Errno::ETXTBSY => "Text file busy",
            Errno::ENOSPC => "No space left on device",
            Errno::EOVERFLOW => "Value too large for defined data type",
            Errno::EOPNOTSUPP => "Operation not supported",
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.text())
    }
}

impl std::error::Error for Errno {}
