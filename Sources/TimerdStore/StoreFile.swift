internal import CSQLite
import TimerdSystem

/// Opening `state.db`: at start-up, and again when a failing store opens the file afresh.
enum StoreFile {
    /// An open, configured database at the current schema version, and the file it has open.
    struct Opened {
        var database: Database
        var pin: PinnedFile
        /// Why an unusable file was moved aside and a fresh one started, and where it went.
        var recovered: String?
    }

    /// `PRAGMA synchronous`: FULL in production; NORMAL only to measure what FULL costs.
    enum Synchronous: String { case full = "FULL", normal = "NORMAL" }

    /// Opens (creating) the database at `path` and brings its schema up to date.
    ///
    /// A file that is not a database, fails `PRAGMA quick_check` or has a schema version newer than this
    /// build knows is moved aside to `state.db.corrupt-<UTC time>` (with its `-wal` and `-shm`) and a fresh
    /// database is created; `recovered` then says why and where the old file went. Nothing is deleted.
    /// Other failures (permissions, a read-only file, I/O errors, a lock held too long) throw, naming
    /// `path`, and leave the file alone. A new file is created with mode 0600.
    static func open(_ path: String, migrations: [Migration], synchronous: Synchronous) throws(StoreError) -> Opened {
        let knownVersion = migrations.last?.version ?? 0
        var recovered: String?
        var database: Database
        switch try inspect(path, knownVersion: knownVersion) {
        case .usable(let opened):
            database = opened
        case .unusable(let why):
            let movedTo = try Files.moveAside(path)
            recovered = "\(path) \(why); moved it to \(movedTo) and started a fresh state database"
            switch try inspect(path, knownVersion: knownVersion) {
            case .usable(let opened): database = opened
            case .unusable(let why): throw StoreError("\(path): a fresh database \(why)")
            }
        }
        do {
            try configure(database, synchronous: synchronous)
            try Schema.migrate(database, migrations: migrations)
            try finishCancels(database)
            // The log a killed timerd left (up to 4 MB before SQLite reuses it) goes back into the file
            // and is cut to nothing: on a nearly full disk that room is what later writes need.
            try? database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return Opened(database: database, pin: try PinnedFile(path), recovered: recovered)
        } catch {
            database.close()
            throw error
        }
    }

    /// Deletes the jobs of every `CANCEL` answered whose deletions were not all written (a stop or crash
    /// in between: `StoreChange.markCancelled`), the names from its `done` on, and its row, in one
    /// transaction: a file opened has no job of a cancel answered. Nothing without the table (a file
    /// opened with older migrations, in tests).
    static func finishCancels(_ database: Database) throws(StoreError) {
        let hasTable = try database.strings("SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'cancels'")
        guard !hasTable.isEmpty else { return }
        let left = try database.query(
            "SELECT cancels.id, cancels.names, coalesce(cancels_done.done, 0) FROM cancels LEFT JOIN cancels_done USING (id) ORDER BY id"
        ) { row in (id: row.int(0), names: row.text(1), done: row.int(2)) }
        guard !left.isEmpty else { return }
        try database.executeScript("BEGIN IMMEDIATE")
        do {
            for cancel in left {
                let names = cancel.names.split(separator: "\n").dropFirst(cancel.done).map(String.init)
                try database.deleteJobs(names)
            }
            try database.executeScript("DELETE FROM cancels")
            try database.executeScript("DELETE FROM cancels_done")
            try database.executeScript("COMMIT")
        } catch {
            if database.inTransaction { try? database.executeScript("ROLLBACK") }
            throw StoreError("\(database.path): deleting the jobs of a cancel answered before the stop: \(error.message)")
        }
    }

    /// Opens the file at `path` again, known to be the one opened before (no checks, no migration).
    static func reopen(_ path: String, synchronous: Synchronous) throws(StoreError) -> Database {
        let database = try writableDatabase(path)
        do {
            try configure(database, synchronous: synchronous)
        } catch {
            database.close()
            throw error
        }
        return database
    }

    /// Writes to the database and commits (one page; `user_version` set to what it is): whether writes
    /// work, which opening cannot tell (a directory that is not writable, a full disk).
    static func probe(_ database: Database, version: Int) throws(StoreError) {
        try database.execute("BEGIN IMMEDIATE")
        do {
            // PRAGMA takes no parameters; the version is this build's own constant.
            try database.execute("PRAGMA user_version = \(version)")
            try database.execute("COMMIT")
        } catch {
            if database.inTransaction { try? database.execute("ROLLBACK") }
            throw error
        }
    }

    private enum Inspection {
        case usable(Database)
        case unusable(String)
    }

    /// Opens `path` and checks it without writing: a database, not corrupt, not from a newer build.
    private static func inspect(_ path: String, knownVersion: Int) throws(StoreError) -> Inspection {
        try Files.createIfMissing(path, mode: 0o600)
        // Not even a SQLite header: leave it to no SQLite code (which might take its -wal for its own).
        let header = try Files.prefix(path, count: 16)
        if !header.isEmpty && header != Array("SQLite format 3\0".utf8) {
            return .unusable("is not a SQLite database")
        }
        let database = try writableDatabase(path)
        database.setPersistentWAL(true)
        do {
            let version = try database.userVersion
            if version > knownVersion {
                database.close()
                return .unusable(
                    "has schema version \(version), newer than this build knows (\(knownVersion)): it was written by a newer timerd")
            }
            let problems = try database.strings("PRAGMA quick_check")
            if problems != ["ok"] {
                database.close()
                let shown = problems.prefix(3).joined(separator: "; ")
                return .unusable("failed its integrity check (\(shown)\(problems.count > 3 ? "; …" : ""))")
            }
            database.setPersistentWAL(false)
            return .usable(database)
        } catch {
            database.close()
            if error.sqliteCode == SQLITE_NOTADB { return .unusable("is not a SQLite database") }
            if error.sqliteCode == SQLITE_CORRUPT {
                return .unusable("is corrupt (\(String(cString: sqlite3_errstr(SQLITE_CORRUPT))))")
            }
            throw error
        }
    }

    /// Opens `path` for writing. SQLite silently opens a file it cannot write read-only: that throws here,
    /// with the OS error of opening it for writing ("Read-only file system (EROFS)").
    private static func writableDatabase(_ path: String) throws(StoreError) -> Database {
        let database = try Database(path: path)
        guard database.isReadOnly else { return database }
        database.close()
        do {
            try FileDescriptor.open(path, .readWrite).close()
        } catch {
            throw .system("\(path) is not writable", error)
        }
        throw .fault("\(path) is not writable (SQLite opened it read-only)", reason: "\(path) is not writable")
    }

    private static func configure(_ database: Database, synchronous: Synchronous) throws(StoreError) {
        let mode = try database.strings("PRAGMA journal_mode = WAL").first ?? ""
        guard mode.lowercased() == "wal" else {
            throw StoreError("\(database.path): cannot use write-ahead logging (journal mode stays \"\(mode)\")")
        }
        // PRAGMA values cannot be bound; these are fixed words of this file.
        try database.executeScript("PRAGMA synchronous = \(synchronous.rawValue)")
        try database.executeScript("PRAGMA foreign_keys = ON")
    }
}
