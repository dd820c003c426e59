package service

// PagesRead exposes the database's page count to the external tests.
func PagesRead(s *Service) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db.PagesRead()
}
