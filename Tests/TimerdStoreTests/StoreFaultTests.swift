import Glibc
import Testing
import TimerdCore
@testable import TimerdStore

/// Storage faults: what opening the store does with a file system or file it cannot write.
@Suite struct StoreFaultTests {
    // MARK: Opening

    @Test(.enabled(if: !isRoot, "root writes whatever the permissions; readOnlyFileSystemFailsTheOpen covers it as root"))
    func aWriteProtectedFileFailsTheOpen() throws {
        let dir = try TemporaryDirectory()
        defer {
            chmod(dir.path + "/state", 0o700)
            dir.remove()
        }
        let (store, _) = try StateStore.open(directory: dir.path + "/state")
        store.close()
        chmod(dir.path + "/state/state.db", 0o400)
        chmod(dir.path + "/state", 0o500)
        let error = try #require(throws: StoreError.self) { try StateStore.open(directory: dir.path + "/state") }
        #expect(error.isStorageFault)
        #expect(error.message.contains(dir.path + "/state/state.db"), "\(error)")
        #expect(error.message.contains("(EACCES)"), "\(error)")
    }

    @Test(.enabled(if: isRoot, "mounts a tmpfs, which needs root"))
    func readOnlyFileSystemFailsTheOpen() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let mount = try TemporaryMount(in: dir, size: "1m")
        defer { mount.unmount() }
        let (store, _) = try StateStore.open(directory: mount.path + "/state")
        store.close()
        #expect(mount.remount("ro"))
        let error = try #require(throws: StoreError.self) { try StateStore.open(directory: mount.path + "/state") }
        #expect(error.isStorageFault)
        #expect(error.message == "\(mount.path)/state/state.db is not writable: Read-only file system (EROFS)", "\(error)")
        // A directory that cannot be made there.
        let missing = try #require(throws: StoreError.self) { try StateStore.open(directory: mount.path + "/new") }
        #expect(missing.isStorageFault)
        #expect(missing.message == "cannot create \(mount.path)/new: Read-only file system (EROFS)", "\(missing)")
        // Not a directory: not a storage fault.
        try writeBytes(dir.path + "/file", [])
        let notDirectory = try #require(throws: StoreError.self) { try StateStore.open(directory: dir.path + "/file") }
        #expect(!notDirectory.isStorageFault)
    }
}
