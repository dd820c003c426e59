package service

// WriteProbe makes the open Group write the service row at its commit, as
// an operation that changed the clock would. A readiness probe calls it:
// an empty group commits without writing anything, so its success says
// nothing of a disk that has filled up (SQLite) while a write group's
// failure would say it. Outside a Group it does nothing.
func (s *Service) WriteProbe() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.group != nil {
		s.groupDirty = true
	}
}
