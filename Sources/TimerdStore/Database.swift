internal import CSQLite
import TimerdCore
import TimerdSystem

/// A value bound to a statement parameter. Values only ever reach SQL this way, never by interpolation.
enum SQLValue {
    case integer(Int64)
    case real(Double)
    case text(String)
    case null

    init(_ time: WallTime?) { self = time.map { .integer($0.nanosecondsSinceEpoch) } ?? .null }
    init(_ number: Int?) { self = number.map { .integer(Int64($0)) } ?? .null }
    init(_ number: Double?) { self = number.map { .real($0) } ?? .null }
}

/// One row of a query's result, valid only inside the row closure.
struct Row {
    fileprivate let statement: OpaquePointer

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }
    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(statement, column) }
    func int(_ column: Int32) -> Int { Int(int64(column)) }
    func optionalInt(_ column: Int32) -> Int? { isNull(column) ? nil : int(column) }
    func optionalText(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }
    func time(_ column: Int32) -> WallTime { WallTime(nanosecondsSinceEpoch: int64(column)) }
    func optionalTime(_ column: Int32) -> WallTime? { isNull(column) ? nil : time(column) }
    func optionalDouble(_ column: Int32) -> Double? { isNull(column) ? nil : sqlite3_column_double(statement, column) }

    /// The column as text, every byte kept (an interior NUL included).
    func text(_ column: Int32) -> String {
        guard let bytes = sqlite3_column_text(statement, column) else { return "" }
        let count = Int(sqlite3_column_bytes(statement, column))
        return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
    }
}

/// An open SQLite connection and its cache of prepared statements.
///
/// Not thread-safe by itself: `StateStore` only touches it on its serial queue (and the handle is opened
/// with `SQLITE_OPEN_FULLMUTEX` besides).
final class Database {
    private(set) var handle: OpaquePointer?
    private var statements: [String: OpaquePointer] = [:]
    let path: String

    /// Opens (creating) the database file at `path`, with a busy timeout. Reading it happens later.
    init(path: String) throws(StoreError) {
        self.path = path
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX
        let code = sqlite3_open_v2(path, &handle, flags, nil)
        guard code == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_close_v2(handle)
            throw StoreError("cannot open \(path): \(message)", sqliteCode: code)
        }
        self.handle = handle
        sqlite3_busy_timeout(handle, 5_000)
    }

    deinit { close() }

    func close() {
        for statement in statements.values { sqlite3_finalize(statement) }
        statements = [:]
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
    }

    /// Whether closing the last connection keeps the -wal file instead of deleting it once checkpointed
    /// (`SQLITE_FCNTL_PERSIST_WAL`). On while a file is inspected, so one that is then moved aside keeps
    /// its log whatever SQLite made of it.
    func setPersistentWAL(_ on: Bool) {
        guard let handle else { return }
        var flag: Int32 = on ? 1 : 0
        sqlite3_file_control(handle, "main", SQLITE_FCNTL_PERSIST_WAL, &flag)
    }

    /// Whether a transaction is open (false after SQLite rolled one back by itself on an I/O error).
    var inTransaction: Bool {
        guard let handle else { return false }
        return sqlite3_get_autocommit(handle) == 0
    }

    /// Whether SQLite opened the file read-only: it does so silently when the file or its file system is
    /// not writable (`sqlite3_db_readonly`).
    var isReadOnly: Bool {
        guard let handle else { return false }
        return sqlite3_db_readonly(handle, "main") == 1
    }

    /// The SQLite error `code` (and the OS error under it, for the codes about files) as a `StoreError`.
    private func error(_ what: String, _ code: Int32) -> StoreError {
        let detail = handle.map { String(cString: sqlite3_errmsg($0)) } ?? String(cString: sqlite3_errstr(code))
        let extended = handle.map { sqlite3_extended_errcode($0) } ?? code
        var systemError: Errno?
        if let handle, [SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_READONLY, SQLITE_PERM].contains(code & 0xFF) {
            let number = sqlite3_system_errno(handle)
            if number != 0 { systemError = Errno(rawValue: number) }
        }
        let under = systemError.map { ", \($0)" } ?? ""
        return StoreError(
            "\(path): \(what): \(detail) (SQLite code \(extended)\(under))", sqliteCode: code, extendedCode: extended,
            systemError: systemError)
    }

    private func prepared(_ sql: String) throws(StoreError) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        guard let handle else { throw StoreError.closed(path) }
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else { throw error("preparing \"\(sql)\"", code) }
        statements[sql] = statement
        return statement
    }

    /// SQLite copies bound text at once (`SQLITE_TRANSIENT`).
    private static var transient: sqlite3_destructor_type { unsafeBitCast(-1, to: sqlite3_destructor_type.self) }

    private func bind(_ values: [SQLValue], to statement: OpaquePointer) throws(StoreError) {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch value {
            case .integer(let number): code = sqlite3_bind_int64(statement, index, number)
            case .real(let number): code = sqlite3_bind_double(statement, index, number)
            case .null: code = sqlite3_bind_null(statement, index)
            case .text(let text):
                var text = text
                code = text.withUTF8 { buffer in
                    // An empty buffer may have no address, and a nil pointer would bind NULL.
                    guard let base = buffer.baseAddress, buffer.count > 0 else {
                        return sqlite3_bind_text(statement, index, "", 0, Self.transient)
                    }
                    return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                        sqlite3_bind_text64(
                            statement, index, $0, sqlite3_uint64(buffer.count), Self.transient, UInt8(SQLITE_UTF8))
                    }
                }
            }
            guard code == SQLITE_OK else { throw error("binding parameter \(index)", code) }
        }
    }

    /// Runs `sql` with `values` bound, calling `row` for each result row.
    func query<T>(
        _ sql: String, _ values: [SQLValue] = [], row: (Row) throws(StoreError) -> T
    ) throws(StoreError) -> [T] {
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        try bind(values, to: statement)
        var results: [T] = []
        while true {
            let code = sqlite3_step(statement)
            if code == SQLITE_DONE { return results }
            guard code == SQLITE_ROW else { throw error(String(sql.prefix(60)), code) }
            results.append(try row(Row(statement: statement)))
        }
    }

    /// Runs `sql` with `values` bound, ignoring any rows.
    func execute(_ sql: String, _ values: [SQLValue] = []) throws(StoreError) {
        _ = try query(sql, values) { _ in () }
    }

    /// Runs a script of statements without parameters (schema definitions), unprepared.
    func executeScript(_ sql: String) throws(StoreError) {
        guard let handle else { throw StoreError.closed(path) }
        let code = sqlite3_exec(handle, sql, nil, nil, nil)
        guard code == SQLITE_OK else { throw error(String(sql.prefix(60)), code) }
    }

    /// The first column of every row, as text (PRAGMAs that answer with a list).
    func strings(_ sql: String) throws(StoreError) -> [String] {
        try query(sql) { row in row.text(0) }
    }

    var userVersion: Int {
        get throws(StoreError) { try query("PRAGMA user_version") { $0.int(0) }.first ?? 0 }
    }
}
