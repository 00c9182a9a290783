//! Jute's binary primitives, as `BinaryInputArchive` and
//! `BinaryOutputArchive` write them: big-endian `int` (4 bytes) and `long`
//! (8), `boolean` as one byte, and `buffer`, `ustring` and `vector` as a
//! 4-byte count followed by the bytes or elements, a count of -1 meaning
//! null.

use bytes::{BufMut, BytesMut};

use super::error::WireError;

/// One jute record: how it reads from and writes to the wire.
pub trait Record: Sized {
    /// Reads the record's fields in schema order.
    fn read(r: &mut Reader<'_>) -> Result<Self, WireError>;
    /// Appends the record's fields in schema order.
    fn write(&self, w: &mut BytesMut);
}

/// Decodes exactly one record from `bytes`: left-over bytes are an error.
pub fn from_bytes<T: Record>(bytes: &[u8]) -> Result<T, WireError> {
    let mut r = Reader::new(bytes);
    let value = T::read(&mut r)?;
    r.finish()?;
    Ok(value)
}

/// Encodes one record (no frame length).
pub fn to_bytes<T: Record>(value: &T) -> BytesMut {
    let mut w = BytesMut::new();
    value.write(&mut w);
    w
}

/// Reads jute primitives from a borrowed frame. Every length is checked
/// against the bytes left before anything is allocated for it.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// Fails if any byte is left unread.
    pub fn finish(&self) -> Result<(), WireError> {
        match self.buf.len() {
            0 => Ok(()),
            n => Err(WireError::TrailingBytes(n)),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if n > self.buf.len() {
            return Err(WireError::Truncated {
                needed: n,
                remaining: self.buf.len(),
            });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub fn int(&mut self) -> Result<i32, WireError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    pub fn long(&mut self) -> Result<i64, WireError> {
        Ok(i64::from_be_bytes(self.array()?))
    }

    /// Like Java's `DataInput.readBoolean`: any non-zero byte is true.
    pub fn bool(&mut self) -> Result<bool, WireError> {
        Ok(self.array::<1>()?[0] != 0)
    }

    /// A count prefix: `None` for -1 (null), an error for other negative
    /// values.
    fn count(&mut self) -> Result<Option<usize>, WireError> {
        match self.int()? {
            -1 => Ok(None),
            n if n < 0 => Err(WireError::NegativeLength(n)),
            n => Ok(Some(n as usize)),
        }
    }

    /// A `buffer`; `None` when null.
    pub fn buffer(&mut self) -> Result<Option<&'a [u8]>, WireError> {
        match self.count()? {
            None => Ok(None),
            Some(n) => self.take(n).map(Some),
        }
    }

    /// A `buffer` whose null the schema does not distinguish from empty
    /// (passwords, auth data, SASL tokens).
    pub fn bytes(&mut self) -> Result<Vec<u8>, WireError> {
        Ok(self.buffer()?.map(<[u8]>::to_vec).unwrap_or_default())
    }

    /// A `buffer` kept as `Option` (node data, which ZooKeeper stores as
    /// null or bytes).
    pub fn opt_bytes(&mut self) -> Result<Option<Vec<u8>>, WireError> {
        Ok(self.buffer()?.map(<[u8]>::to_vec))
    }

    /// A `ustring` that may be null.
    pub fn opt_string(&mut self) -> Result<Option<String>, WireError> {
        match self.buffer()? {
            None => Ok(None),
            Some(b) => std::str::from_utf8(b)
                .map(|s| Some(s.to_owned()))
                .map_err(|_| WireError::InvalidUtf8),
        }
    }

    /// A `ustring` that must not be null (paths, ACL ids).
    pub fn string(&mut self) -> Result<String, WireError> {
        self.opt_string()?.ok_or(WireError::NullString)
    }

    /// A `vector`: a null vector reads as empty. Every element of every
    /// vector in the schema takes at least four bytes, so a count larger
    /// than a quarter of what is left is rejected before any allocation.
    pub fn vector<T>(
        &mut self,
        mut element: impl FnMut(&mut Self) -> Result<T, WireError>,
    ) -> Result<Vec<T>, WireError> {
        let Some(n) = self.count()? else {
            return Ok(Vec::new());
        };
        if n > self.buf.len() / 4 {
            return Err(WireError::Truncated {
                needed: n.saturating_mul(4),
                remaining: self.buf.len(),
            });
        }
        let mut out = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            out.push(element(self)?);
        }
        Ok(out)
    }

    /// A `vector<ustring>`.
    pub fn strings(&mut self) -> Result<Vec<String>, WireError> {
        self.vector(Self::string)
    }

    /// A nested record.
    pub fn record<T: Record>(&mut self) -> Result<T, WireError> {
        T::read(self)
    }

    /// Any [`Field`], its encoding chosen by its type.
    pub fn field<T: Field>(&mut self) -> Result<T, WireError> {
        T::read_field(self)
    }
}

/// Writes jute primitives onto a `BytesMut`.
pub trait Writer {
    fn int(&mut self, v: i32);
    fn long(&mut self, v: i64);
    fn bool(&mut self, v: bool);
    fn buffer(&mut self, v: Option<&[u8]>);
    fn string(&mut self, v: &str);
    fn opt_string(&mut self, v: Option<&str>);
}

/// A count as jute writes it. Lengths past `i32::MAX` cannot be framed;
/// the frame limit stops them long before this.
fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

impl Writer for BytesMut {
    fn int(&mut self, v: i32) {
        self.put_i32(v);
    }
    fn long(&mut self, v: i64) {
        self.put_i64(v);
    }
    fn bool(&mut self, v: bool) {
        self.put_u8(u8::from(v));
    }
    fn buffer(&mut self, v: Option<&[u8]>) {
        match v {
            None => self.put_i32(-1),
            Some(b) => {
                self.put_i32(count(b.len()));
                self.put_slice(b);
            }
        }
    }
    fn string(&mut self, v: &str) {
        self.buffer(Some(v.as_bytes()));
    }
    fn opt_string(&mut self, v: Option<&str>) {
        self.buffer(v.map(str::as_bytes));
    }
}

/// One field of a record: a jute type as the schema uses it, read and
/// written by the primitives above. The Rust type says which encoding:
/// `Vec<u8>` is a buffer whose null reads as empty, `Option<Vec<u8>>` one
/// kept as null, `Vec<T>` a vector, any [`Record`] a nested record.
pub trait Field: Sized {
    fn read_field(r: &mut Reader<'_>) -> Result<Self, WireError>;
    fn write_field(&self, w: &mut BytesMut);
}

impl<T: Record> Field for T {
    fn read_field(r: &mut Reader<'_>) -> Result<Self, WireError> {
        T::read(r)
    }
    fn write_field(&self, w: &mut BytesMut) {
        self.write(w);
    }
}

impl Field for i32 {
    fn read_field(r: &mut Reader<'_>) -> Result<Self, WireError> {
        r.int()
    }
    fn write_field(&self, w: &mut BytesMut) {
        w.int(*self);
    }
}

impl Field for i64 {
    fn read_field(r: &mut Reader<'_>) -> Result<Self, WireError> {
        r.long()
    }
    fn write_field(&self, w: &mut BytesMut) {
        w.long(*self);
    }
}

impl Field for bool {
    fn read_field(r: &mut Reader<'_>) -> Result<Self, WireError> {
        r.bool()
    }
    fn write_field(&self, w: &mut BytesMut) {
        w.bool(*self);
    }
}

/// The connect records' trailing `readOnly` byte, which older clients
/// leave out: absent when the record ends before it, and then not written
/// either. Only a record's last field can be one.
impl Field for Option<bool> {
    fn read_field(r: &mut Reader<'_>) -> Result<Self, WireError> {
        if r.remaining() > 0 {
            r.bool().map(Some)
        } else {
            Ok(None)
        }
    }
    fn write_field(&self, w: &mut BytesMut) {
        if let Some(v) = *self {
            w.bool(v);
        }
    }
}

impl Field for String {
    fn read_field(r: &mut Reader<'_>) -> Result<Self, WireError> {
        r.string()
    }
    fn write_field(&self, w: &mut BytesMut) {
        w.string(self);
    }
}

impl Field for Option<String> {
    fn read_field(r: &mut Reader<'_>) -> Result<Self, WireError> {
        r.opt_string()
    }
    fn write_field(&self, w: &mut BytesMut) {
        w.opt_string(self.as_deref());
    }
}

impl Field for Vec<u8> {
    fn read_field(r: &mut Reader<'_>) -> Result<Self, WireError> {
        r.bytes()
    }
    fn write_field(&self, w: &mut BytesMut) {
        w.buffer(Some(self));
    }
}

impl Field for Option<Vec<u8>> {
    fn read_field(r: &mut Reader<'_>) -> Result<Self, WireError> {
        r.opt_bytes()
    }
    fn write_field(&self, w: &mut BytesMut) {
        w.buffer(self.as_deref());
    }
}

impl<T: Field> Field for Vec<T> {
    fn read_field(r: &mut Reader<'_>) -> Result<Self, WireError> {
        r.vector(T::read_field)
    }
    fn write_field(&self, w: &mut BytesMut) {
        w.put_i32(count(self.len()));
        for v in self {
            v.write_field(w);
        }
    }
}

/// A struct whose fields are [`Field`]s, and its [`Record`] impl: the
/// fields are read and written in declaration order, which is the
/// schema's.
macro_rules! record {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($(#[$fmeta:meta])* pub $field:ident: $ty:ty,)*
        }
    ) => {
        $(#[$meta])*
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl $crate::wire::jute::Record for $name {
            fn read(
                r: &mut $crate::wire::jute::Reader<'_>,
            ) -> Result<Self, $crate::wire::error::WireError> {
                // Struct expressions evaluate their fields in the order
                // written, so this reads in schema order.
                Ok(Self {
                    $($field: $crate::wire::jute::Field::read_field(r)?,)*
                })
            }
            fn write(&self, w: &mut bytes::BytesMut) {
                $($crate::wire::jute::Field::write_field(&self.$field, w);)*
            }
        }
    };
}
pub(crate) use record;

/// An `i32` enumeration of the protocol: its variants and numbers,
/// `ALL`, `from_i32` (an unknown number is `WireError::$err`), `code`, and
/// its [`Field`] impl.
macro_rules! int_enum {
    (
        $(#[$meta:meta])*
        $name:ident, $err:ident {
            $($(#[$doc:meta])* $variant:ident = $value:literal,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(i32)]
        pub enum $name {
            $($(#[$doc])* $variant = $value,)*
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            pub fn from_i32(value: i32) -> Result<Self, $crate::wire::error::WireError> {
                match value {
                    $($value => Ok($name::$variant),)*
                    other => Err($crate::wire::error::WireError::$err(other)),
                }
            }

            /// The number on the wire.
            pub fn code(self) -> i32 {
                self as i32
            }
        }

        impl $crate::wire::jute::Field for $name {
            fn read_field(
                r: &mut $crate::wire::jute::Reader<'_>,
            ) -> Result<Self, $crate::wire::error::WireError> {
                Self::from_i32(r.int()?)
            }
            fn write_field(&self, w: &mut bytes::BytesMut) {
                $crate::wire::jute::Writer::int(w, self.code());
            }
        }
    };
}
pub(crate) use int_enum;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_and_empty_buffers_differ() {
        let mut w = BytesMut::new();
        w.buffer(None);
        w.buffer(Some(b""));
        assert_eq!(&w[..], &[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        let mut r = Reader::new(&w);
        assert_eq!(r.buffer(), Ok(None));
        assert_eq!(r.buffer(), Ok(Some(&b""[..])));
        assert_eq!(r.finish(), Ok(()));
    }

    #[test]
    fn lengths_are_checked_before_use() {
        // A buffer claiming 2 GiB in a 6-byte frame.
        let mut r = Reader::new(&[0x7f, 0xff, 0xff, 0xff, 1, 2]);
        assert_eq!(
            r.buffer(),
            Err(WireError::Truncated {
                needed: i32::MAX as usize,
                remaining: 2
            })
        );
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xfe]);
        assert_eq!(r.buffer(), Err(WireError::NegativeLength(-2)));
        // A vector claiming a billion strings.
        let mut r = Reader::new(&[0x40, 0, 0, 0, 0, 0, 0, 0]);
        assert!(matches!(r.strings(), Err(WireError::Truncated { .. })));
        let mut r = Reader::new(&[0, 0, 0, 2, 0xc3, 0x28]);
        assert_eq!(r.string(), Err(WireError::InvalidUtf8));
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(r.string(), Err(WireError::NullString));
    }
}
