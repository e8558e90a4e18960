import TimerdConfig
import TimerdCore
import TimerdSystem

/// Who is at the other end of a control connection, from `SO_PEERCRED` when it connected.
struct Client: Sendable, Equatable {
    var uid: UInt32
    var gid: UInt32
    var pid: Int32

    /// Root and the user timerd runs as are trusted: they act on every job, may use the root-only verbs and
    /// keys (`MODE NAME`, `RELOAD`, `user=`, `group=`, `ca_file=`), and no per-user limit applies to them.
    var isAdmin: Bool { Self.isAdmin(uid: uid) }

    static func isAdmin(uid: UInt32) -> Bool { uid == 0 || uid == daemonUID }

    /// Whether this client may see `ownerUID`'s jobs in full and change them: its own, or any for admins.
    func owns(_ ownerUID: UInt32) -> Bool { isAdmin || uid == ownerUID }

    /// The daemon itself (config jobs, internal calls).
    static let daemon = Client(uid: daemonUID, gid: CurrentProcess.groupID, pid: CurrentProcess.id)
    static let daemonUID = CurrentProcess.userID

    /// For log lines: "uid 1001 (pid 4242)".
    var label: String { "uid \(uid) (pid \(pid))" }
}

/// The access settings in force (`docs/security.md`), shared by the control server, its connections, the
/// handler and the registry; replaced as a whole when the config is reloaded.
final class AccessControl: Sendable {
    private let current: Locked<AccessSettings>

    init(_ settings: AccessSettings) {
        current = Locked(settings)
    }

    var settings: AccessSettings { current.withLock { $0 } }

    func update(_ settings: AccessSettings) {
        current.withLock { $0 = settings }
    }
}

/// Where users and groups are looked up: the system's account database (NSS), or a fixed table in tests.
protocol AccountDirectory: Sendable {
    func user(uid: UInt32) throws(TimerdError) -> UserAccount?
    func user(named name: String) throws(TimerdError) -> UserAccount?
    func group(named name: String) throws(TimerdError) -> GroupAccount?
    /// The user's groups: the primary one and every group listing the user (what `initgroups` sets).
    func groups(of user: UserAccount) throws(TimerdError) -> [UInt32]
}

/// The system's account database, through getpwuid_r/getpwnam_r/getgrnam_r/getgrouplist.
struct SystemAccounts: AccountDirectory {
    func user(uid: UInt32) throws(TimerdError) -> UserAccount? {
        do { return try UserAccount.lookup(uid: uid) } catch { throw Self.failure("uid \(uid)", error) }
    }

    func user(named name: String) throws(TimerdError) -> UserAccount? {
        do { return try UserAccount.lookup(name: name) } catch { throw Self.failure("user \(name)", error) }
    }

    func group(named name: String) throws(TimerdError) -> GroupAccount? {
        do { return try GroupAccount.lookup(name: name) } catch { throw Self.failure("group \(name)", error) }
    }

    func groups(of user: UserAccount) throws(TimerdError) -> [UInt32] {
        do { return try user.supplementaryGroups(primary: user.gid) } catch { throw Self.failure("the groups of \(user.name)", error) }
    }

    private static func failure(_ what: String, _ error: Errno) -> TimerdError {
        TimerdError(.internal, "cannot look up \(what) in the account database: \(error)")
    }
}

extension Int {
    /// 1, 10, 100, 1000, …: when a repeated limit hit is logged again (each hit is counted, not each logged).
    var isLogMilestone: Bool {
        self > 0 && String(self).utf8.dropFirst().allSatisfy { $0 == UInt8(ascii: "0") } && String(self).hasPrefix("1")
    }
}
