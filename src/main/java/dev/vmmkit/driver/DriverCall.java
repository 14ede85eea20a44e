package dev.vmmkit.driver;

/** The kinds of driver call, for counters, logging and fault injection. */
public enum DriverCall {
    RESERVE("reserve"),
    ADDRESS_FREE("address_free"),
    CREATE("create"),
    RELEASE("release"),
    MAP("map"),
    SET_ACCESS("set_access"),
    UNMAP("unmap"),
    EXPORT_HANDLE("export_handle"),
    IMPORT_HANDLE("import_handle"),
    MEMORY_INFO("memory_info"),
    EVENT_CREATE("event_create"),
    EVENT_RECORD("event_record"),
    EVENT_QUERY("event_query"),
    EVENT_SYNCHRONIZE("event_synchronize"),
    EVENT_DESTROY("event_destroy"),
    DEVICE_SYNCHRONIZE("device_synchronize"),
    PINNED_ALLOCATE("pinned_allocate"),
    PINNED_FREE("pinned_free"),
    STREAM_CREATE("stream_create"),
    STREAM_DESTROY("stream_destroy"),
    COPY_TO_HOST("copy_to_host"),
    COPY_TO_DEVICE("copy_to_device");

    private static final DriverCall[] VALUES = values();
    private final String key;

    DriverCall(String key) {
        this.key = key;
    }

    /** The snake_case name used in reports and JSON. */
    public String key() {
        return key;
    }

    static DriverCall[] all() {
        return VALUES;
    }
}
