import Glibc
import Testing

@testable import TimerdSystem

@Suite struct AccountsTests {
    @Test func rootByNameAndByUid() throws {
        let root = try #require(try UserAccount.lookup(name: "root"))
        #expect(root.name == "root")
        #expect(root.uid == 0)
        #expect(root.gid == 0)
        #expect(root.home == "/root")
        #expect(root.shell.hasPrefix("/"))
        #expect(try UserAccount.lookup(uid: 0) == root)
    }

    @Test func nobody() throws {
        let nobody = try #require(try UserAccount.lookup(name: "nobody"))
        #expect(nobody.uid == 65534)
        #expect(try UserAccount.lookup(uid: nobody.uid) == nobody)
        #expect(try GroupAccount.lookup(gid: nobody.gid) != nil)
    }

    @Test func unknownNamesAndIdsAreNil() throws {
        #expect(try UserAccount.lookup(name: "timerd-no-such-user") == nil)
        #expect(try UserAccount.lookup(name: "") == nil)
        #expect(try UserAccount.lookup(name: "ro\0ot") == nil)
        // Numeric names are names: "0" is not root (and there is no user called "0").
        #expect(try UserAccount.lookup(name: "0") == nil)
        #expect(try UserAccount.lookup(uid: 3_999_999_999) == nil)
        #expect(try GroupAccount.lookup(name: "timerd-no-such-group") == nil)
        #expect(try GroupAccount.lookup(name: "0") == nil)
        #expect(try GroupAccount.lookup(gid: 3_999_999_999) == nil)
    }

    @Test func groupsOfRootIncludeZeroFirst() throws {
        let root = try #require(try UserAccount.lookup(name: "root"))
        let groups = try root.supplementaryGroups(primary: root.gid)
        #expect(groups.first == 0)
        // Whatever primary group is given comes first, as with initgroups.
        let other = try root.supplementaryGroups(primary: 4242)
        #expect(other.first == 4242)
        #expect(Set(other).isSuperset(of: Set(groups).subtracting([0])))
    }

    @Test func supplementaryGroupsAgreeWithId() throws {
        // id(1) computes a user's groups with getgrouplist too, independently of this code.
        for line in try getent("passwd") {
            let account = try #require(try UserAccount.lookup(name: String(line[0])))
            let groups = try account.supplementaryGroups(primary: account.gid)
            let id = try run("/usr/bin/id", ["-G", account.name])
            #expect(id.status.isSuccess)
            let expected = id.output.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { UInt32($0) }
            #expect(Set(groups) == Set(expected), "groups of \(account.name)")
        }
    }

    @Test func groupLookups() throws {
        let root = try #require(try GroupAccount.lookup(name: "root"))
        #expect(root.gid == 0)
        #expect(try GroupAccount.lookup(gid: 0) == root)
    }

    @Test func everyUserAndGroupAgreesWithGetent() throws {
        let users = try getent("passwd")
        #expect(users.count >= 2)
        for fields in users {
            try #require(fields.count == 7)
            let account = try #require(try UserAccount.lookup(name: String(fields[0])))
            #expect(
                account
                    == UserAccount(
                        name: String(fields[0]), uid: UInt32(fields[2])!, gid: UInt32(fields[3])!,
                        home: String(fields[5]), shell: String(fields[6])))
            #expect(try UserAccount.lookup(uid: account.uid)?.uid == account.uid)
        }
        let groups = try getent("group")
        #expect(groups.count >= 2)
        for fields in groups {
            try #require(fields.count == 4)
            let group = try #require(try GroupAccount.lookup(name: String(fields[0])))
            let members = fields[3].split(separator: ",").map(String.init)
            #expect(group == GroupAccount(name: String(fields[0]), gid: UInt32(fields[2])!, members: members))
            #expect(try GroupAccount.lookup(gid: group.gid)?.gid == group.gid)
        }
    }

    @Test func aTinyBufferGrowsUntilTheEntryFits() throws {
        // Start from one byte: every lookup goes through ERANGE several times.
        for fields in try getent("passwd") {
            let name = String(fields[0])
            let account = try #require(try UserAccount.lookup(name: name, initialBufferSize: 1))
            #expect(try account == UserAccount.lookup(name: name))
            #expect(try UserAccount.lookup(uid: account.uid, initialBufferSize: 1)?.uid == account.uid)
        }
        for fields in try getent("group") {
            let name = String(fields[0])
            let group = try #require(try GroupAccount.lookup(name: name, initialBufferSize: 1))
            #expect(try group == GroupAccount.lookup(name: name))
            #expect(try GroupAccount.lookup(gid: group.gid, initialBufferSize: 1)?.gid == group.gid)
        }
        #expect(try UserAccount.lookup(name: "timerd-no-such-user", initialBufferSize: 1) == nil)
    }
}

/// The entries of `getent <database>`, split at ":" (empty fields kept).
private func getent(_ database: String) throws -> [[Substring]] {
    let result = try run("/usr/bin/getent", [database])
    #expect(result.status.isSuccess)
    return result.output.split(separator: "\n").map { $0.split(separator: ":", omittingEmptySubsequences: false) }
}
