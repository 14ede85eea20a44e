package dev.vmmkit.driver;

/**
 * Forwards every call; each device synchronisation first runs {@code before}: a test's gate (a
 * device busy until the test lets it finish), a count, or a delay.
 */
public class BeforeDeviceSyncDriver extends ForwardingDriver {
    private final StreamEvents events;

    public BeforeDeviceSyncDriver(VmmDriver delegate, Runnable before) {
        super(delegate);
        this.events = new ForwardingEvents(delegate.events()) {
            @Override
            public void synchronizeDevice() {
                before.run();
                super.synchronizeDevice();
            }
        };
    }

    @Override
    public StreamEvents events() {
        return events;
    }
}
