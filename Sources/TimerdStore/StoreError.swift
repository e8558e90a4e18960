internal import CSQLite
import TimerdSystem

/// Why the store could not do what was asked (the SQLite message and code included).
///
/// Either a storage fault (`isStorageFault`: the disk, the file system or the file failed the store; the
/// same write may work later) or a logical error (a constraint, a value SQLite refuses: it fails again).
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public var message: String
    /// The primary SQLite result code behind the error, or 0 when it did not come from SQLite.
    var sqliteCode: Int32
    /// The extended SQLite result code (`SQLITE_IOERR_FSYNC`, `SQLITE_READONLY_DIRECTORY`, …), or 0.
    var extendedCode: Int32
    /// The OS error under it (`sqlite3_system_errno`, or the store's own call's), or nil.
    var systemError: Errno?
    /// Set for storage faults that are not SQLite result codes (a removed or replaced file, the store
    /// closed, an OS error opening the directory): the short reason shown as `StoreHealth`'s.
    private var fault: String?

    public init(_ message: String) {
        self.message = message
        sqliteCode = 0
        extendedCode = 0
    }

    init(_ message: String, sqliteCode: Int32, extendedCode: Int32 = 0, systemError: Errno? = nil) {
        self.message = message
        self.sqliteCode = sqliteCode & 0xFF
        self.extendedCode = extendedCode == 0 ? sqliteCode : extendedCode
        self.systemError = systemError
    }

    /// A storage fault that did not come from SQLite; `reason` is the short form of `message`.
    static func fault(
        _ message: String, reason: String, systemError: Errno? = nil, sqliteCode: Int32 = 0
    ) -> StoreError {
        var error = StoreError(message, sqliteCode: sqliteCode)
        error.fault = reason
        error.systemError = systemError
        return error
    }

    /// An OS call failed: a storage fault whose reason is the OS error.
    static func system(_ what: String, _ error: Errno) -> StoreError {
        fault("\(what): \(error)", reason: "\(what): \(error)", systemError: error)
    }

    /// The store was closed (`StateStore.close()`), or its handle is not open.
    static func closed(_ path: String) -> StoreError {
        fault("\(path): the state store is closed", reason: "the state store is closed")
    }

    /// `SQLITE_READONLY_DIRECTORY` (a macro Swift does not import).
    private static let readOnlyDirectory = SQLITE_READONLY | (6 << 8)

    /// The storage faults among SQLite's primary result codes: the write may work once the disk, file
    /// system, file or lock holder is fixed. The others (CONSTRAINT, MISMATCH, TOOBIG, RANGE, …) are
    /// about the data and fail again.
    private static let faultCodes: Set<Int32> = [
        SQLITE_FULL, SQLITE_IOERR, SQLITE_READONLY, SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_BUSY, SQLITE_LOCKED,
        SQLITE_NOMEM, SQLITE_PROTOCOL, SQLITE_CORRUPT, SQLITE_NOTADB,
    ]

    /// Whether the disk, file system or file failed (a retry may succeed), rather than the data.
    public var isStorageFault: Bool { fault != nil || Self.faultCodes.contains(sqliteCode) }

    /// What failed, short and human, for `StoreHealth.failing` and `STATUS=`: "disk full (SQLITE_FULL)",
    /// "/var/lib/timerd/state.db was removed", …; the message itself for a logical error.
    public var reason: String {
        if let fault { return fault }
        let what: String
        switch sqliteCode {
        case SQLITE_FULL: what = "disk full (SQLITE_FULL)"
        case SQLITE_IOERR: what = "I/O error (SQLITE_IOERR)"
        case SQLITE_READONLY where extendedCode == Self.readOnlyDirectory:
            what = "the state directory is not writable (SQLITE_READONLY_DIRECTORY)"
        case SQLITE_READONLY: what = "the file system or the file is read-only (SQLITE_READONLY)"
        case SQLITE_CANTOPEN: what = "cannot open the database file (SQLITE_CANTOPEN)"
        case SQLITE_PERM: what = "permission denied (SQLITE_PERM)"
        case SQLITE_BUSY: what = "the database is locked by another process (SQLITE_BUSY)"
        case SQLITE_LOCKED: what = "the database is locked (SQLITE_LOCKED)"
        case SQLITE_NOMEM: what = "out of memory (SQLITE_NOMEM)"
        case SQLITE_PROTOCOL: what = "file locking failed (SQLITE_PROTOCOL)"
        case SQLITE_CORRUPT: what = "the database file is corrupt (SQLITE_CORRUPT)"
        case SQLITE_NOTADB: what = "the database file is not a database (SQLITE_NOTADB)"
        default: return message
        }
        return systemError.map { "\(what): \($0)" } ?? what
    }

    public var description: String { message }
}
