//! auth/munge: credentials from the host's `munged`, through libmunge loaded at run time
//! (`libmunge.so.2`, Debian's `libmunge2`), so that Drover builds without it and only a host
//! configured for MUNGE needs it. A context is made per call: libmunge's contexts must not be
//! shared between threads.

use super::AuthError;
use std::ffi::{c_char, c_int, c_void, CStr, CString};

const MUNGE_OPT_CIPHER_TYPE: c_int = 0;
const MUNGE_CIPHER_NONE: c_int = 0;
const MUNGE_CIPHER_DEFAULT: c_int = 1;
const MUNGE_OPT_TTL: c_int = 4;
const MUNGE_OPT_SOCKET: c_int = 8;
const MUNGE_OPT_UID_RESTRICTION: c_int = 9;
const MUNGE_UID_ANY: u32 = u32::MAX;
const EMUNGE_SOCKET: c_int = 6;
const EMUNGE_CRED_EXPIRED: c_int = 15;
const EMUNGE_CRED_REWOUND: c_int = 16;
const EMUNGE_CRED_REPLAYED: c_int = 17;
const EMUNGE_CRED_UNAUTHORIZED: c_int = 18;

type CtxCreate = unsafe extern "C" fn() -> *mut c_void;
type CtxDestroy = unsafe extern "C" fn(*mut c_void);
type CtxSet = unsafe extern "C" fn(*mut c_void, c_int, ...) -> c_int;
type CtxGet = unsafe extern "C" fn(*mut c_void, c_int, ...) -> c_int;
type CtxStrerror = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type Encode = unsafe extern "C" fn(*mut *mut c_char, *mut c_void, *const c_void, c_int) -> c_int;
type Decode =
    unsafe extern "C" fn(*const c_char, *mut c_void, *mut *mut c_void, *mut c_int, *mut u32, *mut u32) -> c_int;
type Strerror = unsafe extern "C" fn(c_int) -> *const c_char;

/// What [`Munge::decode`] found in a credential.
pub struct Decoded {
    pub payload: Vec<u8>,
    pub uid: u32,
    pub gid: u32,
    pub sealed: bool,
}

pub struct Munge {
    // Keeps the library loaded while the function pointers below are used.
    _lib: libloading::Library,
    ctx_create: CtxCreate,
    ctx_destroy: CtxDestroy,
    ctx_set: CtxSet,
    ctx_get: CtxGet,
    ctx_strerror: CtxStrerror,
    encode: Encode,
    decode: Decode,
    strerror: Strerror,
    socket: Option<CString>,
    shown_socket: String,
}

/// A libmunge context, destroyed when dropped.
struct Ctx<'a> {
    m: &'a Munge,
    p: *mut c_void,
}

impl Drop for Ctx<'_> {
    fn drop(&mut self) {
        // SAFETY: `p` came from munge_ctx_create and is destroyed once.
        unsafe { (self.m.ctx_destroy)(self.p) }
    }
}

impl Munge {
    pub fn open(socket: Option<&str>) -> Result<Munge, AuthError> {
        // SAFETY: loading libmunge runs no initialisers beyond libc's; the symbols are
        // resolved with the signatures of munge.h (0.5).
        unsafe {
            let lib = libloading::Library::new("libmunge.so.2").map_err(|e| {
                AuthError::Unavailable(format!(
                    "auth/munge: cannot load libmunge.so.2 ({e}); install MUNGE (apt-get install munge libmunge2)"
                ))
            })?;
            fn sym<T: Copy>(lib: &libloading::Library, name: &[u8]) -> Result<T, AuthError> {
                // SAFETY: the caller names each symbol with its C signature.
                unsafe { lib.get::<T>(name) }.map(|s| *s).map_err(|e| {
                    AuthError::Unavailable(format!(
                        "auth/munge: libmunge.so.2 lacks {}: {e}",
                        String::from_utf8_lossy(name)
                    ))
                })
            }
            let socket = socket
                .map(|s| {
                    CString::new(s).map_err(|_| AuthError::Unavailable("AuthInfo=socket= holds a NUL byte".into()))
                })
                .transpose()?;
            Ok(Munge {
                ctx_create: sym(&lib, b"munge_ctx_create\0")?,
                ctx_destroy: sym(&lib, b"munge_ctx_destroy\0")?,
                ctx_set: sym(&lib, b"munge_ctx_set\0")?,
                ctx_get: sym(&lib, b"munge_ctx_get\0")?,
                ctx_strerror: sym(&lib, b"munge_ctx_strerror\0")?,
                encode: sym(&lib, b"munge_encode\0")?,
                decode: sym(&lib, b"munge_decode\0")?,
                strerror: sym(&lib, b"munge_strerror\0")?,
                shown_socket: socket
                    .as_ref()
                    .map_or("munged's default socket".into(), |s| format!("{}", s.to_string_lossy())),
                socket,
                _lib: lib,
            })
        }
    }

    /// A context for encoding (`seal`: see [`Munge::encode`]) or, without `ttl`, decoding.
    fn ctx(&self, ttl: Option<u32>, seal: Option<u32>) -> Result<Ctx<'_>, AuthError> {
        // SAFETY: plain calls into libmunge; the socket string outlives the context's use.
        unsafe {
            let p = (self.ctx_create)();
            if p.is_null() {
                return Err(AuthError::Unavailable("auth/munge: munge_ctx_create failed".into()));
            }
            let ctx = Ctx { m: self, p };
            if let Some(s) = &self.socket {
                (self.ctx_set)(p, MUNGE_OPT_SOCKET, s.as_ptr());
            }
            if let Some(t) = ttl {
                (self.ctx_set)(p, MUNGE_OPT_TTL, c_int::try_from(t).unwrap_or(c_int::MAX));
                match seal {
                    // A secret rides in it: munged's cipher, and only `uid` may decode it.
                    Some(uid) => {
                        (self.ctx_set)(p, MUNGE_OPT_CIPHER_TYPE, MUNGE_CIPHER_DEFAULT);
                        (self.ctx_set)(p, MUNGE_OPT_UID_RESTRICTION, uid as libc::uid_t);
                    }
                    // Nothing else in our payloads is secret (ids, a nonce, a challenge or a
                    // digest): MUNGE's MAC vouches for them, and the cipher is work saved.
                    None => {
                        (self.ctx_set)(p, MUNGE_OPT_CIPHER_TYPE, MUNGE_CIPHER_NONE);
                    }
                }
            }
            Ok(ctx)
        }
    }

    fn message(&self, ctx: &Ctx<'_>, e: c_int) -> String {
        // SAFETY: both return static or context-owned NUL-terminated strings (or NULL).
        unsafe {
            let p = (self.ctx_strerror)(ctx.p);
            let p = if p.is_null() { (self.strerror)(e) } else { p };
            if p.is_null() {
                format!("MUNGE error {e}")
            } else {
                CStr::from_ptr(p).to_string_lossy().to_string()
            }
        }
    }

    /// A credential of this process's uid and gid carrying `payload`, good for `ttl` seconds;
    /// `seal`ed to a uid, it is encrypted and only that uid's processes can decode it (what
    /// `munge --restrict-uid` makes; root is no exception unless munged was built to make one).
    pub fn encode(&self, payload: &[u8], ttl: u32, seal: Option<u32>) -> Result<String, AuthError> {
        let ctx = self.ctx(Some(ttl), seal)?;
        let mut out: *mut c_char = std::ptr::null_mut();
        let len = c_int::try_from(payload.len()).map_err(|_| AuthError::Invalid("payload too large".into()))?;
        // SAFETY: `out` receives a malloc'd NUL-terminated string on success, freed below.
        let e = unsafe { (self.encode)(&mut out, ctx.p, payload.as_ptr().cast(), len) };
        if e != 0 || out.is_null() {
            let why = self.message(&ctx, e);
            let hint = if e == EMUNGE_SOCKET {
                format!(" (is munged running on this host? it should listen at {})", self.shown_socket)
            } else {
                String::new()
            };
            return Err(AuthError::Unavailable(format!("Munge encode failed: {why}{hint}")));
        }
        // SAFETY: `out` is a valid C string from libmunge, freed once with free(3).
        let s = unsafe {
            let s = CStr::from_ptr(out).to_string_lossy().to_string();
            libc::free(out.cast());
            s
        };
        Ok(s)
    }

    /// The payload, uid and gid of a credential (munged checks it, its life and replay), and
    /// whether it was sealed (encrypted, restricted to a uid: see [`Munge::encode`]).
    pub fn decode(&self, cred: &str) -> Result<Decoded, AuthError> {
        let ctx = self.ctx(None, None)?;
        let c = CString::new(cred).map_err(|_| AuthError::Invalid("a MUNGE credential with a NUL byte".into()))?;
        let (mut buf, mut len, mut uid, mut gid): (*mut c_void, c_int, u32, u32) = (std::ptr::null_mut(), 0, 0, 0);
        // SAFETY: libmunge fills the out-parameters; `buf` is malloc'd (even on some errors)
        // and freed below.
        let e = unsafe { (self.decode)(c.as_ptr(), ctx.p, &mut buf, &mut len, &mut uid, &mut gid) };
        let payload = if buf.is_null() {
            Vec::new()
        } else {
            // SAFETY: libmunge allocated `len` bytes at `buf`.
            unsafe {
                let v = std::slice::from_raw_parts(buf.cast::<u8>(), usize::try_from(len).unwrap_or(0)).to_vec();
                libc::free(buf);
                v
            }
        };
        let host = || {
            use prost::Message;
            crate::v1::AuthClaims::decode(payload.as_slice()).map(|c| c.host).unwrap_or_else(|_| "another host".into())
        };
        match e {
            0 => {
                let (mut cipher, mut restricted): (c_int, libc::uid_t) = (MUNGE_CIPHER_NONE, MUNGE_UID_ANY);
                // SAFETY: after a decode the context holds the credential's settings; each
                // option is read into a variable of its type in munge.h.
                let sealed = unsafe {
                    (self.ctx_get)(ctx.p, MUNGE_OPT_CIPHER_TYPE, &mut cipher as *mut c_int) == 0
                        && (self.ctx_get)(ctx.p, MUNGE_OPT_UID_RESTRICTION, &mut restricted as *mut libc::uid_t) == 0
                        && cipher != MUNGE_CIPHER_NONE
                        && restricted != MUNGE_UID_ANY
                };
                Ok(Decoded { payload, uid, gid, sealed })
            }
            EMUNGE_CRED_UNAUTHORIZED => Err(AuthError::NotOurs(self.message(&ctx, e))),
            EMUNGE_CRED_REPLAYED => Err(AuthError::Replayed),
            EMUNGE_CRED_EXPIRED => Err(AuthError::Invalid(format!(
                "expired MUNGE credential from {} (check that the clocks of both hosts agree)",
                host()
            ))),
            EMUNGE_CRED_REWOUND => Err(AuthError::Invalid(format!(
                "MUNGE credential from {} made in the future (clock skew: synchronise the clocks)",
                host()
            ))),
            EMUNGE_SOCKET => Err(AuthError::Unavailable(format!(
                "Munge decode failed: {} (is munged running on this host? it should listen at {})",
                self.message(&ctx, e),
                self.shown_socket
            ))),
            _ => Err(AuthError::Invalid(format!("Munge decode failed: {}", self.message(&ctx, e)))),
        }
    }
}
