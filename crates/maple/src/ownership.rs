//! How the tree holds its values: every leaf slot is one machine word,
//! made and released by an [`Ownership`] strategy (documented there).

use std::marker::PhantomData;
use std::num::{NonZeroU64, NonZeroUsize};
use std::ptr::NonNull;
use std::sync::Arc;

/// How a [`MapleTree`](crate::MapleTree) holds values of type `T`.
///
/// The kernel's maple tree stores pointers (or small integers tagged as
/// values) in its slots and leaves ownership to the caller. A Rust tree
/// must own what it stores, and it must let the two pieces of a split
/// range hold the same value. An `Ownership` strategy says how a `T`
/// becomes a slot word, how readers see it, and how a second piece shares
/// it:
///
/// * [`Boxed`] (the default) takes any `T` and puts it in its own
///   reference-counted allocation, so a split shares it without cloning.
///   One allocation per stored value, one extra pointer per read.
/// * [`Direct`] stores a value that already *is* one word: an `Arc<U>`
///   (readers get an [`ArcRef`] to the `U`, one pointer away), a
///   `&'static U`, or a small `Copy` value kept inside the slot itself
///   (`u8`..`u32`, `i8`..`i32`, `bool`, `char`, `()`, and `NonZeroU64`,
///   `NonZeroUsize`). No allocation by the tree, no reference-count
///   traffic on reads, and nothing to free after a grace period for the
///   inline kinds.
///
/// A `Box<U>` is not offered directly: the pieces of a split range would
/// both own it. Store it as an `Arc<U>` (or let [`Boxed`] do that).
///
/// ```
/// use maple::{Direct, MapleTree};
/// use std::sync::Arc;
///
/// // A VMA-like value the caller already keeps in an Arc: the tree stores
/// // that Arc's pointer, and a lookup reads one pointer to reach it.
/// let mut vmas = MapleTree::with_ownership(Direct);
/// vmas.insert_range(0x1000..=0x1fff, Arc::new("text".to_string())).unwrap();
/// let guard = maple::pin();
/// let vma = vmas.load(0x1800, &guard).unwrap();
/// assert_eq!(vma.as_str(), "text");
/// let owned: Arc<String> = vma.to_arc(); // a counted reference, if wanted
/// assert_eq!(Arc::strong_count(&owned), 2);
///
/// // Small values live in the slot itself.
/// let mut ids = MapleTree::with_ownership(Direct);
/// ids.store_range(10..=19, 7u32).unwrap();
/// assert_eq!(ids.load(12, &guard), Some(7));
/// ```
///
/// # Safety
///
/// An implementation promises, for every word `w` that
/// [`into_word`](Self::into_word) returns:
/// * `w` stays valid for [`borrow`](Self::borrow) from any thread until
///   the last [`release`](Self::release) of it (one for the `into_word`
///   and one for each [`share`](Self::share)), and what `borrow` returns
///   is valid while that is so;
/// * `share` and `release` may run on any thread (the tree defers a
///   release to whichever thread ends the grace period), `borrow` on any
///   thread while another calls `share`;
/// * if [`RELEASES`](Self::RELEASES) is false, `release` does nothing and
///   may be skipped.
pub unsafe trait Ownership<T> {
    /// What a reader gets for a stored value, valid for the guard's `'g`.
    type Ref<'g>: Copy
    where
        T: 'g;

    /// Whether [`release`](Self::release) does anything; a tree skips the
    /// deferred release of values for which it does not.
    const RELEASES: bool;

    /// Turns a value into the word its slot holds (never null: a null slot
    /// is an absent range).
    fn into_word(value: T) -> NonNull<u8>;

    /// What readers see for a stored word.
    ///
    /// # Safety
    /// `word` came from [`into_word`](Self::into_word) and is not fully
    /// released before `'g` ends.
    unsafe fn borrow<'g>(word: NonNull<u8>) -> Self::Ref<'g>
    where
        T: 'g;

    /// Makes `word` owned once more (a second piece of a split range, or a
    /// cloned tree, holds it too).
    ///
    /// # Safety
    /// `word` came from `into_word` and is not fully released.
    unsafe fn share(word: NonNull<u8>);

    /// Gives up one ownership of `word`; the last one drops the value.
    ///
    /// # Safety
    /// `word` came from `into_word`, the caller owns one of its references,
    /// and no reader can reach it through that reference any more.
    unsafe fn release(word: NonNull<u8>);
}

/// The default strategy: any `T`, each stored value in its own shared
/// allocation (an `Arc<T>`), so the pieces of a split range share it.
/// Readers get `&'g T`.
///
/// ```
/// let mut tree = maple::MapleTree::new(); // MapleTree<&str, Boxed>
/// tree.store_range(0..=99, "a").unwrap();
/// tree.store_range(40..=59, "b").unwrap(); // [0,39] and [60,99] share "a"
/// let guard = maple::pin();
/// assert_eq!(tree.load(70, &guard), Some(&"a"));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Boxed;

// SAFETY: the word is an `Arc<T>`'s pointer; it lives until its last
// count is dropped (one per `into_word` and `share`). Values reach other
// threads only through a tree that is `Send` or `Sync`, which it is only
// for `T: Send + Sync`, as an `Arc<T>` would be.
unsafe impl<T> Ownership<T> for Boxed {
    type Ref<'g>
        = &'g T
    where
        T: 'g;
    const RELEASES: bool = true;

    fn into_word(value: T) -> NonNull<u8> {
        arc_word(Arc::new(value))
    }

    unsafe fn borrow<'g>(word: NonNull<u8>) -> &'g T
    where
        T: 'g,
    {
        // SAFETY: per the contract the Arc is alive for 'g.
        unsafe { word.cast::<T>().as_ref() }
    }

    unsafe fn share(word: NonNull<u8>) {
        // SAFETY: the word is a live Arc's pointer.
        unsafe { Arc::increment_strong_count(word.cast::<T>().as_ptr()) }
    }

    unsafe fn release(word: NonNull<u8>) {
        // SAFETY: the caller owns this count.
        unsafe { Arc::decrement_strong_count(word.cast::<T>().as_ptr()) }
    }
}

/// The strategy for values that are one word already: `Arc<U>`,
/// `&'static U`, and small `Copy` values stored inside the slot (see
/// [`Ownership`]). The tree allocates nothing for them.
///
/// ```
/// use maple::{Direct, MapleTree};
/// static TEXT: &str = "text";
/// let mut tree: MapleTree<&'static &str, Direct> = MapleTree::default();
/// tree.store_range(0..=9, &TEXT).unwrap();
/// let guard = maple::pin();
/// assert_eq!(tree.load(5, &guard), Some(&"text"));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Direct;

fn arc_word<U>(arc: Arc<U>) -> NonNull<u8> {
    // SAFETY: `Arc::into_raw` never returns null.
    unsafe { NonNull::new_unchecked(Arc::into_raw(arc).cast_mut().cast::<u8>()) }
}

// SAFETY: as for `Boxed`, with the caller's own Arc.
unsafe impl<U> Ownership<Arc<U>> for Direct {
    type Ref<'g>
        = ArcRef<'g, U>
    where
        U: 'g;
    const RELEASES: bool = true;

    fn into_word(value: Arc<U>) -> NonNull<u8> {
        arc_word(value)
    }

    unsafe fn borrow<'g>(word: NonNull<u8>) -> ArcRef<'g, U>
    where
        U: 'g,
    {
        ArcRef {
            ptr: word.cast::<U>(),
            _guard: PhantomData,
        }
    }

    unsafe fn share(word: NonNull<u8>) {
        // SAFETY: the word is a live Arc's pointer.
        unsafe { Arc::increment_strong_count(word.cast::<U>().as_ptr()) }
    }

    unsafe fn release(word: NonNull<u8>) {
        // SAFETY: the caller owns this count.
        unsafe { Arc::decrement_strong_count(word.cast::<U>().as_ptr()) }
    }
}

// SAFETY: a `'static` reference is valid forever; nothing to count.
unsafe impl<U: 'static> Ownership<&'static U> for Direct {
    type Ref<'g> = &'g U;
    const RELEASES: bool = false;

    fn into_word(value: &'static U) -> NonNull<u8> {
        NonNull::from(value).cast::<u8>()
    }

    unsafe fn borrow<'g>(word: NonNull<u8>) -> &'g U {
        // SAFETY: the word is a `&'static U`.
        unsafe { word.cast::<U>().as_ref() }
    }

    unsafe fn share(_: NonNull<u8>) {}

    unsafe fn release(_: NonNull<u8>) {}
}

/// A reader's view of an `Arc<U>` stored with [`Direct`]: derefs to the
/// `U`, costs no reference count, and lives as long as the grace period
/// it was read in. [`to_arc`](ArcRef::to_arc) makes a counted `Arc<U>`
/// for use after the guard is gone.
pub struct ArcRef<'g, U> {
    ptr: NonNull<U>,
    _guard: PhantomData<&'g U>,
}

impl<U> Clone for ArcRef<'_, U> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<U> Copy for ArcRef<'_, U> {}

impl<'g, U> ArcRef<'g, U> {
    /// The value, for as long as the guard.
    pub fn get(self) -> &'g U {
        // SAFETY: the tree keeps one count of this Arc until a grace
        // period after it unlinks it, and `'g` is inside that grace period.
        unsafe { self.ptr.as_ref() }
    }

    /// A counted `Arc<U>` of the same value.
    pub fn to_arc(self) -> Arc<U> {
        // SAFETY: `ptr` came from `Arc::into_raw` and the tree's count
        // keeps the allocation alive for `'g` (see `get`); taking one more
        // count and wrapping it gives an Arc that owns exactly that count.
        unsafe {
            Arc::increment_strong_count(self.ptr.as_ptr());
            Arc::from_raw(self.ptr.as_ptr())
        }
    }

    /// Runs `f` on the stored `Arc<U>` itself, without touching its count
    /// (for code that takes `&Arc<U>`; cloning it inside `f` counts).
    ///
    /// ```
    /// use std::sync::Arc;
    /// let mut tree = maple::MapleTree::with_ownership(maple::Direct);
    /// let a = Arc::new(1);
    /// tree.store_range(0..=9, Arc::clone(&a)).unwrap();
    /// let g = maple::pin();
    /// let same = tree.load(0, &g).unwrap().with_arc(|arc| Arc::ptr_eq(arc, &a));
    /// assert!(same);
    /// assert_eq!(Arc::strong_count(&a), 2);
    /// ```
    pub fn with_arc<R>(self, f: impl FnOnce(&Arc<U>) -> R) -> R {
        // SAFETY: as in `to_arc`, the pointer is a live Arc's; the
        // `ManuallyDrop` keeps this view from releasing the tree's count.
        let arc = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(self.ptr.as_ptr()) });
        f(&arc)
    }

    /// The address of the value, as `Arc::as_ptr` gives it (for identity
    /// comparisons with `std::ptr::eq`).
    pub fn as_ptr(self) -> *const U {
        self.ptr.as_ptr()
    }
}

impl<U> std::ops::Deref for ArcRef<'_, U> {
    type Target = U;
    fn deref(&self) -> &U {
        self.get()
    }
}

impl<U: std::fmt::Debug> std::fmt::Debug for ArcRef<'_, U> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

impl<U: PartialEq> PartialEq for ArcRef<'_, U> {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

// SAFETY: an ArcRef is a `&U` in all but name.
unsafe impl<U: Sync> Send for ArcRef<'_, U> {}
// SAFETY: as for Send.
unsafe impl<U: Sync> Sync for ArcRef<'_, U> {}

/// Small `Copy` values kept in the slot word itself: shifted up one bit
/// with the low bit set, so the word is never null (the kernel's
/// `xa_mk_value` tagging). The word is not a pointer and carries no
/// provenance.
macro_rules! inline_values {
    ($($t:ty => $to:expr, $from:expr;)*) => {$(
        // SAFETY: the word is a number, never dereferenced; nothing to
        // count or free.
        unsafe impl Ownership<$t> for Direct {
            type Ref<'g> = $t;
            const RELEASES: bool = false;

            fn into_word(value: $t) -> NonNull<u8> {
                let bits: usize = $to(value);
                // SAFETY: `bits << 1 | 1` is odd, so not zero; the value
                // fits in the word's other bits (checked below for the
                // widest kinds).
                unsafe { NonNull::new_unchecked(std::ptr::without_provenance_mut(bits << 1 | 1)) }
            }

            unsafe fn borrow<'g>(word: NonNull<u8>) -> $t
            where
                $t: 'g,
            {
                $from(word.as_ptr().addr() >> 1)
            }

            unsafe fn share(_: NonNull<u8>) {}

            unsafe fn release(_: NonNull<u8>) {}
        }
    )*};
}

inline_values! {
    () => |_| 0usize, |_| ();
    bool => |v: bool| usize::from(v), |b: usize| b != 0;
    u8 => |v: u8| usize::from(v), |b: usize| b as u8;
    u16 => |v: u16| usize::from(v), |b: usize| b as u16;
    i8 => |v: i8| usize::from(v as u8), |b: usize| b as u8 as i8;
    i16 => |v: i16| usize::from(v as u16), |b: usize| b as u16 as i16;
}

// 32-bit values need 33 bits with the tag.
#[cfg(target_pointer_width = "64")]
inline_values! {
    u32 => |v: u32| v as usize, |b: usize| b as u32;
    i32 => |v: i32| v as u32 as usize, |b: usize| b as u32 as i32;
    char => |v: char| v as usize, |b: usize| char::from_u32(b as u32).unwrap_or_default();
}

/// Non-zero words are stored as they are: never null, no tag needed.
macro_rules! nonzero_values {
    ($($t:ty),*) => {$(
        // SAFETY: the word is the (non-zero) number itself, never
        // dereferenced; nothing to count or free.
        unsafe impl Ownership<$t> for Direct {
            type Ref<'g> = $t;
            const RELEASES: bool = false;

            fn into_word(value: $t) -> NonNull<u8> {
                // SAFETY: the value is not zero.
                unsafe { NonNull::new_unchecked(std::ptr::without_provenance_mut(value.get() as usize)) }
            }

            unsafe fn borrow<'g>(word: NonNull<u8>) -> $t
            where
                $t: 'g,
            {
                // SAFETY: the word was made from a non-zero value.
                unsafe { <$t>::new_unchecked(word.as_ptr().addr() as _) }
            }

            unsafe fn share(_: NonNull<u8>) {}

            unsafe fn release(_: NonNull<u8>) {}
        }
    )*};
}

nonzero_values!(NonZeroUsize);
#[cfg(target_pointer_width = "64")]
nonzero_values!(NonZeroU64);
