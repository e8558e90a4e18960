import Glibc

/// A user from the account database (`/etc/passwd`, or whatever NSS is configured to ask).
public struct UserAccount: Sendable, Equatable {
    public var name: String
    public var uid: UInt32
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

    /// The user named `name`, or nil if there is none. A number is a name here, not an id.
    ///
    /// The corresponding C function is `getpwnam_r`.
    public static func lookup(name: String) throws(Errno) -> UserAccount? {
        try find { entry, buffer, size, result in getpwnam_r(name, &entry, buffer, size, &result) }
    }

    /// The user with `uid`, or nil if there is none.
    ///
    /// The corresponding C function is `getpwuid_r`.
    public static func lookup(uid: UInt32) throws(Errno) -> UserAccount? {
        try find { entry, buffer, size, result in getpwuid_r(uid, &entry, buffer, size, &result) }
    }

    /// Every group the user is in: `primary` first, then each group that lists the user (what `initgroups`
    /// would set).
    ///
    /// The corresponding C function is `getgrouplist`.
    public func supplementaryGroups(primary gid: UInt32) throws(Errno) -> [UInt32] {
        var count: Int32 = 32
        while true {
            var groups = [gid_t](repeating: 0, count: Int(count))
            var found = count
            if getgrouplist(name, gid, &groups, &found) != -1 {
                return Array(groups.prefix(Int(found)))
            }
            // -1 with a larger `found`: the array was too small; found says how large it must be.
            guard found > count, found < 1 << 20 else { throw .noMemory }
            count = found
        }
    }

    private static func find(
        _ call: (inout passwd, UnsafeMutablePointer<CChar>, Int, inout UnsafeMutablePointer<passwd>?) -> Int32
    ) throws(Errno) -> UserAccount? {
        var size = 1_024
        while true {
            var entry = passwd()
            var result: UnsafeMutablePointer<passwd>?
            let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: size)
            defer { buffer.deallocate() }
            let status = call(&entry, buffer, size, &result)
            if status == ERANGE, size < 1 << 20 {
                size *= 4
                continue
            }
            // Not found is 0 with a nil result (or, from some NSS modules, ENOENT/ESRCH/EBADF/EPERM).
            if status == 0 || [ENOENT, ESRCH, EBADF, EPERM].contains(status), result == nil { return nil }
            guard status == 0, result != nil else { throw Errno(rawValue: status) }
            return UserAccount(
                name: String(cString: entry.pw_name), uid: entry.pw_uid, gid: entry.pw_gid,
                home: String(cString: entry.pw_dir), shell: String(cString: entry.pw_shell))
        }
    }
}

/// A group from the account database.
public struct GroupAccount: Sendable, Equatable {
    public var name: String
    public var gid: UInt32
    /// The users the group lists (not those whose primary group it is).
    public var members: [String]

    public init(name: String, gid: UInt32, members: [String]) {
        self.name = name
        self.gid = gid
        self.members = members
    }

    /// The group named `name`, or nil if there is none.
    ///
    /// The corresponding C function is `getgrnam_r`.
    public static func lookup(name: String) throws(Errno) -> GroupAccount? {
        try find { entry, buffer, size, result in getgrnam_r(name, &entry, buffer, size, &result) }
    }

    /// The group with `gid`, or nil if there is none.
    ///
    /// The corresponding C function is `getgrgid_r`.
    public static func lookup(gid: UInt32) throws(Errno) -> GroupAccount? {
        try find { entry, buffer, size, result in getgrgid_r(gid, &entry, buffer, size, &result) }
    }

    private static func find(
        _ call: (inout group, UnsafeMutablePointer<CChar>, Int, inout UnsafeMutablePointer<group>?) -> Int32
    ) throws(Errno) -> GroupAccount? {
        var size = 1_024
        while true {
            var entry = group()
            var result: UnsafeMutablePointer<group>?
            let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: size)
            defer { buffer.deallocate() }
            let status = call(&entry, buffer, size, &result)
            if status == ERANGE, size < 1 << 24 {
                size *= 4
                continue
            }
            if status == 0 || [ENOENT, ESRCH, EBADF, EPERM].contains(status), result == nil { return nil }
            guard status == 0, result != nil else { throw Errno(rawValue: status) }
            var members: [String] = []
            if var member = entry.gr_mem {
                while let name = member.pointee {
                    members.append(String(cString: name))
                    member += 1
                }
            }
            return GroupAccount(name: String(cString: entry.gr_name), gid: entry.gr_gid, members: members)
        }
    }
}
