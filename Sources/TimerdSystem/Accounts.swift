import Glibc

/// An entry of the user database (/etc/passwd, or whatever NSS is configured to read).
///
/// Lookups take names and ids literally: a numeric name such as "0" is looked up as a name, never
/// as an id; callers that accept either decide which it is.
public struct UserAccount: Sendable, Equatable {
    public var name: String
    public var uid: UInt32
    /// The primary group.
    public var gid: UInt32
    public var home: String
    public var shell: String

    public init(name: String, uid: UInt32, gid: UInt32, home: String, shell: String) {
        self.name = name
        self.uid = uid
        self.gid = gid
        self.home = home
        self.shell = shell
    }

    /// The user called `name`, or nil if there is none.
    ///
    /// The corresponding C function is `getpwnam_r`.
    public static func lookup(name: String) throws(Errno) -> UserAccount? {
        try lookup(name: name, initialBufferSize: initialBufferSize)
    }

    /// The user with `uid`, or nil if there is none (the first one listed if several share it).
    ///
    /// The corresponding C function is `getpwuid_r`.
    public static func lookup(uid: UInt32) throws(Errno) -> UserAccount? {
        try lookup(uid: uid, initialBufferSize: initialBufferSize)
    }

    /// Every group the user is a member of with `primary` as its primary group, `primary` first:
    /// the list initgroups would give the user's processes, for `Credentials.groups`.
    ///
    /// The corresponding C function is `getgrouplist`.
    public func supplementaryGroups(primary gid: UInt32) throws(Errno) -> [UInt32] {
        if name.utf8.contains(0) {
            throw .invalidArgument
        }
        var capacity: Int32 = 64
        while true {
            var groups = [gid_t](repeating: 0, count: Int(capacity))
            var count = capacity
            if getgrouplist(name, gid, &groups, &count) >= 0 {
                return Array(groups.prefix(Int(count)))
            }
            // -1 with a larger count: the array was too small; with the count unchanged: glibc
            // could not allocate its own working copy.
            guard count > capacity else {
                throw .noMemory
            }
            capacity = count
        }
    }

    /// The lookups with a buffer of `initialBufferSize` bytes to begin with (tests use 1 to
    /// exercise the growth).
    static func lookup(name: String, initialBufferSize: Int) throws(Errno) -> UserAccount? {
        if name.utf8.contains(0) {
            return nil
        }
        return try databaseLookup(initialBufferSize: initialBufferSize) { getpwnam_r(name, $0, $1, $2, $3) } convert: {
            UserAccount($0)
        }
    }

    static func lookup(uid: UInt32, initialBufferSize: Int) throws(Errno) -> UserAccount? {
        try databaseLookup(initialBufferSize: initialBufferSize) { getpwuid_r(uid, $0, $1, $2, $3) } convert: {
            UserAccount($0)
        }
    }

    /// The size glibc suggests (sysconf(_SC_GETPW_R_SIZE_MAX) is 1024, enough for most entries).
    static let initialBufferSize = 1024

    private init(_ entry: passwd) {
        name = String(cString: entry.pw_name)
        uid = entry.pw_uid
        gid = entry.pw_gid
        home = entry.pw_dir.map { String(cString: $0) } ?? ""
        shell = entry.pw_shell.map { String(cString: $0) } ?? ""
    }
}

/// An entry of the group database (/etc/group, or whatever NSS is configured to read).
///
/// As for `UserAccount`, numeric names are names, never ids.
public struct GroupAccount: Sendable, Equatable {
    public var name: String
    public var gid: UInt32
    /// The users listed as members (not those who only have it as their primary group).
    public var members: [String]

    public init(name: String, gid: UInt32, members: [String]) {
        self.name = name
        self.gid = gid
        self.members = members
    }

    /// The group called `name`, or nil if there is none.
    ///
    /// The corresponding C function is `getgrnam_r`.
    public static func lookup(name: String) throws(Errno) -> GroupAccount? {
        try lookup(name: name, initialBufferSize: UserAccount.initialBufferSize)
    }

    /// The group with `gid`, or nil if there is none.
    ///
    /// The corresponding C function is `getgrgid_r`.
    public static func lookup(gid: UInt32) throws(Errno) -> GroupAccount? {
        try lookup(gid: gid, initialBufferSize: UserAccount.initialBufferSize)
    }

    static func lookup(name: String, initialBufferSize: Int) throws(Errno) -> GroupAccount? {
        if name.utf8.contains(0) {
            return nil
        }
        return try databaseLookup(initialBufferSize: initialBufferSize) { getgrnam_r(name, $0, $1, $2, $3) } convert: {
            GroupAccount($0)
        }
    }

    static func lookup(gid: UInt32, initialBufferSize: Int) throws(Errno) -> GroupAccount? {
        try databaseLookup(initialBufferSize: initialBufferSize) { getgrgid_r(gid, $0, $1, $2, $3) } convert: {
            GroupAccount($0)
        }
    }

    private init(_ entry: group) {
        name = String(cString: entry.gr_name)
        gid = entry.gr_gid
        var members: [String] = []
        if var member = entry.gr_mem {
            while let name = member.pointee {
                members.append(String(cString: name))
                member += 1
            }
        }
        self.members = members
    }
}

extension Credentials {
    /// The identity `account` logs in with: its uid, its primary gid and all its groups (what
    /// initgroups would set).
    ///
    /// The corresponding C function is `getgrouplist`.
    public init(account: UserAccount) throws(Errno) {
        self.init(uid: account.uid, gid: account.gid, groups: try account.supplementaryGroups(primary: account.gid))
    }
}

/// Runs a reentrant user or group database lookup (getpwnam_r and friends), doubling its buffer
/// from `initialBufferSize` bytes while it reports ERANGE (up to 64 MiB), and converts the entry
/// while the buffer its strings point into is alive. Nil when there is no such entry.
private func databaseLookup<Entry, Value>(
    initialBufferSize: Int,
    _ call: (
        UnsafeMutablePointer<Entry>, UnsafeMutablePointer<CChar>, Int,
        UnsafeMutablePointer<UnsafeMutablePointer<Entry>?>
    ) -> Int32,
    convert: (Entry) -> Value
) throws(Errno) -> Value? {
    let maximumBufferSize = 64 << 20
    let entry = UnsafeMutablePointer<Entry>.allocate(capacity: 1)
    defer { entry.deallocate() }
    var size = max(initialBufferSize, 1)
    while true {
        let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: size)
        defer { buffer.deallocate() }
        var found: UnsafeMutablePointer<Entry>?
        let status = call(entry, buffer, size, &found)
        switch status {
        case 0:
            return found.map { convert($0.pointee) }
        case ENOENT, ESRCH:
            // glibc says "not found" with 0 and no entry; some NSS modules say it this way.
            return nil
        case EINTR:
            continue
        case ERANGE where size < maximumBufferSize:
            size *= 2
        default:
            throw Errno(rawValue: status)
        }
    }
}
